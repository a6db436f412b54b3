"""Timing helpers the suites share (test_pca_throughput.py,
test_pca_comparators.py, test_event_api.py, test_pca_event_api.py): their
sizes (timed or smoke), a wall clock around one call, contenders interleaved
in pytest-benchmark's rounds or in rounds of their own (median CPU time),
the check of a
played subspace, the statistics of a suite's results, a dict (name, n) ->
list of seconds, one per round, and record_ratios, which every benchmark uses
to put its ratios to its in-run baseline into pytest-benchmark's extra_info
(shown by the docs' measured-performance page; the regression gate is
benchmarks/gate.py, on instruction counts).

Plain functions, not fixtures: the suites' table and floor code calls them
outside any test. Imported relatively (``from ._timing import ...``):
pytest's importlib mode (pyproject.toml) puts no test folder on sys.path.
"""
from __future__ import annotations

import math
import time

import numpy as np
from threadpoolctl import threadpool_info

from streamfit.experiments import loglog_slope

ORTHO_TOL = 1e-10   # components_ rows orthonormal (QR, Rayleigh-Ritz or eigenvectors in float64)

# The kinds of ratio_<kind>_<what> in extra_info and which way is better; the
# same table as BETTER in docs/_ext/bench_tables.py, which renders them.
RATIO_KINDS = {"speedup": "higher", "time": "lower", "error": "lower", "memory": "lower"}


def parametrize_sizes(metafunc, smoke, **sizes):
    """For a suite's pytest_generate_tests: each fixture named in sizes that the
    test uses runs over its sizes, or over smoke under --benchmark-disable
    (known only once options are parsed); ids "n=..."."""
    timed = not metafunc.config.getoption("benchmark_disable")
    for name, timed_sizes in sizes.items():
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, timed_sizes if timed else smoke, ids=lambda n: f"n={n}")


def clock(times, fn, *args, per=1, **kwargs):
    """fn(*args, **kwargs), its wall time / per appended to times; returns None so
    that no result stays alive into the next contender's run."""
    start = time.perf_counter()
    fn(*args, **kwargs)
    times.append((time.perf_counter() - start) / per)


def rotated(order, r):
    """order rotated by -r: round r of an interleaved run starts at order[r % len]."""
    r %= len(order)
    return order[r:] + order[:r]


def cpu_medians(rounds, contenders):
    """{name: median CPU seconds of one call} of contenders ({name: callable})
    over rounds, round r calling them in an order rotated by r, so that a
    change of load hits all alike. CPU time (time.process_time), not wall:
    for single-threaded code on a shared machine it is what another process
    moves least."""
    names = list(contenders)
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in rotated(names, r):
            start = time.process_time()
            contenders[name]()
            times[name].append(time.process_time() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def interleave(benchmark, rounds, timed, others, call, prepare=None):
    """benchmark.pedantic over rounds in which the contenders `timed` and
    `others` run once each, interleaved: round r runs others + [timed] rotated
    by -r. call(name, r) is a contender's timed work in round r (it clocks
    itself); prepare(name, r), if given, its untimed work just before.
    pytest-benchmark times call(timed, r); the contenders before it run in its
    setup, those after in its teardown. `timed` runs last in round 0, so the
    single round of --benchmark-disable (one setup and call, no teardown) runs
    every contender without a teardown, which is called all the same."""
    order = list(others) + [timed]
    rotations = [rotated(order, r) for r in range(rounds)]
    done = []

    def run(names, r):
        for name in names:
            if prepare is not None:
                prepare(name, r)
            call(name, r)

    def setup():
        r = len(done)
        names = rotations[r]
        run(names[:names.index(timed)], r)
        if prepare is not None:
            prepare(timed, r)

    def teardown():
        r = len(done)
        names = rotations[r]
        run(names[names.index(timed) + 1:], r)
        done.append(names)

    benchmark.pedantic(lambda: call(timed, len(done)), setup=setup, teardown=teardown,
                       rounds=rounds, iterations=1, warmup_rounds=0)
    if benchmark.disabled:      # pytest-benchmark calls no teardown when disabled
        teardown()


def blas_threads():
    """The thread count of every BLAS library loaded (for extra_info: the
    count a benchmark ran with)."""
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def record_ratios(benchmark, ratios):
    """Put ratios, {"ratio_<kind>_<what>": value}, into benchmark.extra_info.

    Kinds (RATIO_KINDS): ``speedup`` = baseline time / ours (higher is
    better); ``time`` = our time / the baseline's or a floor's, ``error`` =
    our error / the baseline's, ``memory`` = our memory / the baseline's
    (lower is better). A value of None (the baseline was skipped) is left
    out; a name of another form, or a value that is not a finite positive
    number, is a ValueError: a reader could not tell which way is better."""
    for name, value in ratios.items():
        parts = name.split("_", 2)
        if len(parts) < 3 or parts[0] != "ratio" or parts[1] not in RATIO_KINDS or not parts[2]:
            raise ValueError(f"ratio name {name!r} is not ratio_<kind>_<what> with kind in "
                             f"{sorted(RATIO_KINDS)}")
        if value is None:
            continue
        value = float(value)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"ratio {name} = {value!r}: not a finite positive number")
        benchmark.extra_info[name] = value


def check_components(est, k, n):
    """est.components_, after checking it is k orthonormal rows of length n."""
    V = est.components_
    assert V.shape == (k, n)
    ortho = np.abs(V @ V.T - np.eye(k)).max()
    assert ortho <= ORTHO_TOL, f"components_ not orthonormal: max |V V^T - I| = {ortho:.3g}"
    return V


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


def slope(results, name, sizes):
    """loglog_slope of the median time against n over sizes; None unless every
    size was run (and there are two or more)."""
    times = [seconds(results, name, n) for n in sizes]
    if len(sizes) < 2 or any(t is None for t in times):
        return None
    return loglog_slope(sizes, times)


def fmt_x(r, digits=2):
    """A ratio as text, "12.34x" (digits decimals); "n/a" for None."""
    return f"{r:.{digits}f}x" if r is not None else "n/a"


def missed(checks):
    """The failures among checks, (what, value, bound, value must be >= bound)
    each, as lines; a value of None (not measured) is no failure. A value is a
    ratio (shown with an x) unless `what` names a slope."""
    return [f"{what}: {value:.2f}{'' if 'slope' in what else 'x'} "
            f"{'<' if at_least else '>'} {bound:g}"
            for what, value, bound, at_least in checks
            if value is not None and (value < bound if at_least else value > bound)]
