"""Cost of a DropoutPCA trial: lazy dropout (one Bernoulli draw per instance,
a warm-started top-k solve after a kept one) against Follow the Perturbed
Leader and Follow the Leader, and the paper's fresh redraw (resample="fresh",
O(t n^2) + an O(n^3) solve a trial) as the reference the lazy form replaces.

Workload, float64, BLAS pinned to one thread (conftest): k = 10 on
make_spiked_stream(n_spikes=10) at n = 200 and 500, each estimator warmed up
with the same WARMUP rows (so fresh redraws sums of that many rows), then one
partial_fit of T rows per round (fresh: FRESH_T rows), contenders interleaved
in a rotating order; per trial = time / rows. The ratio table is printed and
written to .benchmarks/dropout_ratios.txt; the ratios are also in each
benchmark's extra_info (ratio_*).

    pytest benchmarks/test_dropout_throughput.py -s                      # timed
    pytest benchmarks/test_dropout_throughput.py --benchmark-disable -q  # smoke
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from streamfit import DropoutPCA, FollowTheLeaderPCA, PerturbedLeaderPCA
from streamfit.simulate import make_spiked_stream

from ._timing import (check_components, clock, fmt_x, interleave, parametrize_sizes, ratio,
                      record_ratios)

K = 10
SIZES = (200, 500)
SMOKE_SIZES = (60,)
WARMUP = 200
TRIALS = {200: 200, 500: 100, 60: 5}
FRESH_T = 5
ROUNDS = 7

MAKE = {"lazy": lambda: DropoutPCA(K, random_state=0),
        "fresh": lambda: DropoutPCA(K, resample="fresh", random_state=0),
        "fpl": lambda: PerturbedLeaderPCA(K, random_state=0),
        "ftl": lambda: FollowTheLeaderPCA(K)}


def pytest_generate_tests(metafunc):
    parametrize_sizes(metafunc, SMOKE_SIZES, drop_n=SIZES)


@pytest.fixture(scope="module")
def results():
    return {}


def test_dropout_trial(benchmark, results, timed, drop_n, bench_rounds):
    n = drop_n
    rounds = bench_rounds(ROUNDS)
    T = TRIALS[n]
    benchmark.group = f"pca dropout k={K} n={n}: one partial_fit of {T} trials (lazy)"
    X = make_spiked_stream(WARMUP + T + 1, n, n_spikes=K, random_state=n)
    # each round restarts from the same warmed-up state, so every contender
    # times the same trials
    warm = {name: pickle.dumps(make().partial_fit(X[:WARMUP])) for name, make in MAKE.items()}
    times = {name: [] for name in MAKE}
    current = {}

    def prepare(name, r):
        current[name] = pickle.loads(warm[name])

    def call(name, r):
        rows = X[WARMUP:WARMUP + (FRESH_T if name == "fresh" else T)]
        clock(times[name], current[name].partial_fit, rows, per=len(rows))

    interleave(benchmark, rounds, "lazy", ["fpl", "ftl", "fresh"], call, prepare)
    for name in MAKE:
        assert len(times[name]) == rounds
        check_components(current[name], K, n)
    results.update({(name, n): v for name, v in times.items()})
    record_ratios(benchmark, {"ratio_time_lazy_over_fpl": ratio(results, "lazy", "fpl", n),
                              "ratio_time_lazy_over_ftl": ratio(results, "lazy", "ftl", n),
                              "ratio_speedup_lazy_vs_fresh": ratio(results, "fresh", "lazy", n)})


def test_dropout_table(results, timed, publish_table):
    sizes = SIZES if timed else SMOKE_SIZES
    lines = [f"DropoutPCA trial, k = {K}, spiked stream, t = {WARMUP}, one BLAS thread "
             "(medians of interleaved rounds)",
             "n | lazy ms | fresh ms | FPL ms | FTL ms | lazy/FPL | fresh/lazy"]
    for n in sizes:
        if ("lazy", n) not in results:
            pytest.skip("run with the trial benchmarks")
        med = {name: float(np.median(results[name, n])) * 1e3 for name in MAKE}
        lines.append(f"{n} | {med['lazy']:.2f} | {med['fresh']:.2f} | {med['fpl']:.2f} | "
                     f"{med['ftl']:.2f} | {fmt_x(ratio(results, 'lazy', 'fpl', n))} | "
                     f"{fmt_x(ratio(results, 'fresh', 'lazy', n))}")
    publish_table("\n".join(lines), "dropout_ratios.txt")
