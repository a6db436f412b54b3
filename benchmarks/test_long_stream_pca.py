"""Long streams: Follow the Perturbed Leader over 10^5 trials at n = 100.

Workload, float64, BLAS pinned to one thread (conftest): PerturbedLeaderPCA(5)
with the defaults (sigma="auto", noise="fixed", solver="auto") on the paper's
adversarial stream (:func:`streamfit.simulate.make_ftl_adversary`, n = 100,
rows of norm <= 1), generated chunk by chunk (5,000 rows a call) so that the
stream itself takes no memory. At checkpoints T = 10^3, 3 10^3, 10^4, 3 10^4,
10^5 the table gives:

* regret_ against the paper's bound at the sigma in use,
  regret_bound(T, n, k, sigma_), and its log-log slope (sqrt(T): 0.5);
* the process's resident memory (current RSS from /proc/self/statm) and the
  growth of its peak (ru_maxrss) since the first checkpoint: flat in T, as the
  state is O(n^2) (S, N, C, a 64-row buffer) whatever the stream's length;
* trials per second.

    pytest benchmarks/test_long_stream_pca.py -s        # timed: 10^5 trials (~40 s)
    pytest benchmarks/test_long_stream_pca.py --benchmark-disable -q
                                                         # smoke: 3,000 trials

Timed runs also write the table to .benchmarks/pca_long_stream.txt; extra_info
holds ratio_time_late_over_early_trials (time per trial over the last stretch /
over the second) and ratio_error_regret_over_bound (at the last checkpoint). Each run
asserts what it measures: regret within the bound at every checkpoint, memory
flat (current RSS within 16 MB of the first checkpoint's, peak growth too).
"""
from __future__ import annotations

import resource
import sys
import time

import numpy as np

from streamfit import PerturbedLeaderPCA
from streamfit.experiments import loglog_slope
from streamfit.pca import regret_bound
from streamfit.simulate import make_ftl_adversary

from ._timing import check_components, record_ratios

N, K = 100, 5
CHECKPOINTS = (1_000, 3_000, 10_000, 30_000, 100_000)
SMOKE = (300, 1_000, 3_000)
CHUNK = 5_000
FLAT_MB = 16.0


def adversary_rows(a, b, n):
    """Rows a..b-1 of make_ftl_adversary(., n): the preamble
    sqrt(i / (2n)) e_i, i = 1..n-1, then e_0, e_1, ... cyclically."""
    X = np.zeros((b - a, n))
    t = np.arange(a, b)
    pre = t < n - 1
    X[np.flatnonzero(pre), t[pre] + 1] = np.sqrt((t[pre] + 1) / (2.0 * n))
    rest = t[~pre] - (n - 1)
    X[np.flatnonzero(~pre), rest % n] = 1.0
    return X


def rss_mb():
    """Current resident memory (Linux /proc), else the peak (other systems)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize() / 2 ** 20
    except OSError:         # pragma: no cover - not Linux
        return peak_mb()


def peak_mb():
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 2 ** 10


def test_fpl_long_stream(benchmark, timed, publish_table):
    checkpoints = CHECKPOINTS if timed else SMOKE
    T = checkpoints[-1]
    benchmark.group = f"pca long stream: FPL k={K} n={N}, {T} trials"
    # the generator reproduces the simulator's stream
    np.testing.assert_array_equal(adversary_rows(0, 250, N), make_ftl_adversary(250, N, K))
    np.testing.assert_array_equal(adversary_rows(120, 260, N),
                                  make_ftl_adversary(260, N, K)[120:])
    rows = []

    def run():
        est = PerturbedLeaderPCA(K, random_state=0)
        done, start, base_peak = 0, time.perf_counter(), None
        for stop in checkpoints:
            while done < stop:
                b = min(stop, done + CHUNK)
                est.partial_fit(adversary_rows(done, b, N))
                done = b
            elapsed = time.perf_counter() - start
            bound = regret_bound(done, N, K, est.sigma_)
            if base_peak is None:
                base_peak = peak_mb()
            rows.append({"T": done, "regret": est.regret_, "bound": bound,
                         "rss": rss_mb(), "peak_growth": peak_mb() - base_peak,
                         "rate": done / elapsed, "elapsed": elapsed})
        return est

    est = benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)
    check_components(est, K, N)
    assert est.n_trials_ == T

    slope = loglog_slope([r["T"] for r in rows], [r["regret"] for r in rows])
    lines = [f"Online PCA over a long stream: PerturbedLeaderPCA(k={K}), n={N}, "
             f"make_ftl_adversary rows fed {CHUNK} a call ("
             + ("timed" if timed else "smoke run under --benchmark-disable") + ")",
             f"{'T':>8s}{'regret':>11s}{'bound':>11s}{'ratio':>8s}{'RSS MB':>9s}"
             f"{'peak +MB':>10s}{'trials/s':>10s}"]
    for r in rows:
        lines.append(f"{r['T']:8d}{r['regret']:11.2f}{r['bound']:11.1f}"
                     f"{r['regret'] / r['bound']:8.3f}{r['rss']:9.1f}{r['peak_growth']:10.1f}"
                     f"{r['rate']:10.0f}")
    lines.append(f"log-log slope of the regret over T: {slope:.2f} (sqrt(T): 0.5; "
                 f"Follow the Leader's on this stream: 1.0)")
    publish_table("\n".join(lines), "pca_long_stream.txt")
    benchmark.extra_info.update(regret_slope=slope, rows=rows)
    # the in-run baseline is the stream's own start: time per trial over the
    # last stretch against the second (the first holds the initial solve)
    # does not grow with T, and the regret stays this far under its bound
    early, late = rows[:2], rows[-2:]
    record_ratios(benchmark, {
        "ratio_time_late_over_early_trials":
            ((late[1]["elapsed"] - late[0]["elapsed"]) / (late[1]["T"] - late[0]["T"]))
            / ((early[1]["elapsed"] - early[0]["elapsed"]) / (early[1]["T"] - early[0]["T"])),
        "ratio_error_regret_over_bound": rows[-1]["regret"] / rows[-1]["bound"]})

    for r in rows:
        assert 0 < r["regret"] <= r["bound"], r
    rss = [r["rss"] for r in rows]
    assert max(rss) - rss[0] <= FLAT_MB, f"resident memory grew with T: {rss}"
    assert rows[-1]["peak_growth"] <= FLAT_MB, rows[-1]
    if timed:
        assert 0.35 < slope < 0.65, slope
