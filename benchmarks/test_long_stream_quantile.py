"""Long streams: online quantile regression over 10^7 rows (d = 20), generated
in chunks of 100,000 rows and never held in memory at once.

For T = 10^5, 10^6, 10^7 rows and each setting (single-sample statistical
schedule, averaged, batch of 100): the final relative error against beta*,
the estimator's time per row (fitting only, generation excluded; one BLAS
thread), and the peak of memory allocated while streaming (tracemalloc, which
sees NumPy's buffers: one chunk plus the estimator's state). Memory must be
flat in T: the peak at the largest T within 1.25x of the smallest's; time per
row and error are reported as ratios to the smallest T. Storage mode is left
out: it keeps all data by definition (memory grows with T). The time ratio
recorded compares the longest stream with itself, timed in the same loop: the
median ns/row of its last ten chunks over that of its chunks 1-10 (the
lengths are run one after another, so their time per row is reported only).

    pytest benchmarks/test_long_stream_quantile.py -s                  # 10^5..10^7 (~1 min)
    pytest benchmarks/test_long_stream_quantile.py --benchmark-disable # smoke: 10^5..10^6

The table prints in the terminal summary and (timed runs) goes to
.benchmarks/quantile_long_stream.txt; the ratios (error and memory of the
longest stream to the shortest, time late over early) are in extra_info
(ratio_*), reported: the regression gate is benchmarks/gate.py.
"""
from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

from streamfit import OnlineQuantileRegressor
from streamfit.simulate import make_linear_stream

from ._timing import record_ratios

D = 20
CHUNK = 100_000
TIMED_T = (10**5, 10**6, 10**7)
SMOKE_T = (10**5, 3 * 10**5, 10**6)     # from one chunk up: peaks compare
SETTINGS = {
    "single": dict(),
    "single, averaged": dict(average=True),
    "batch of 100": dict(mode="batch", batch_size=100),
}


def stream_fit(est, T, seed=0):
    """Feed T rows of the paper's model, chunk by chunk; returns (beta, fit
    seconds of each chunk, peak traced bytes while streaming)."""
    rng = np.random.default_rng(seed)
    beta = make_linear_stream(1, D, random_state=rng)[2]
    fit = []
    tracemalloc.start()
    try:
        for start in range(0, T, CHUNK):
            X, y, _ = make_linear_stream(min(CHUNK, T - start), D, beta=beta, random_state=rng)
            t0 = time.perf_counter()
            est.partial_fit(X, y)
            fit.append(time.perf_counter() - t0)
            del X, y
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return beta, fit, peak


@pytest.fixture(scope="module")
def lengths(timed):
    return TIMED_T if timed else SMOKE_T


@pytest.fixture(scope="module")
def rows():
    return {}


@pytest.fixture(scope="module", autouse=True)
def long_stream_report(rows, publish_table, lengths):
    yield
    if not rows:
        return
    lines = [f"Online quantile regression over long streams: d = {D}, tau = 0.5, t_1.1 noise, "
             f"chunks of {CHUNK:,} rows", "",
             f"{'setting':18s}{'T':>12s}{'rel. error':>12s}{'ns/row':>9s}{'peak MiB':>10s}"
             f"{'err/err0':>10s}{'time/t0':>9s}{'peak/p0':>9s}"]
    for name in SETTINGS:
        base = rows.get((name, lengths[0]))
        for T in lengths:
            if (name, T) not in rows or base is None:
                continue
            err, ns, peak = rows[(name, T)]
            lines.append(f"{name:18s}{T:>12,d}{err:>12.2e}{ns:>9.1f}{peak / 2**20:>10.1f}"
                         f"{err / base[0]:>10.3f}{ns / base[1]:>9.2f}{peak / base[2]:>9.2f}")
    publish_table("\n".join(lines), "quantile_long_stream.txt")


@pytest.mark.parametrize("name", list(SETTINGS))
@pytest.mark.benchmark(group="quantile long stream")
def test_long_stream(benchmark, name, lengths, rows):
    results, chunks = {}, {}

    def run():
        for T in lengths:
            est = OnlineQuantileRegressor(0.5, **SETTINGS[name])
            beta, fit, peak = stream_fit(est, T)
            assert est.n_samples_seen_ == T
            err = float(np.linalg.norm(est.coef_ - beta) / np.linalg.norm(beta))
            results[T] = (err, sum(fit) / T * 1e9, peak)
            chunks[T] = fit

    benchmark.pedantic(run, rounds=1, iterations=1)
    for T, result in results.items():
        rows[(name, T)] = result
    small, large = results[lengths[0]], results[lengths[-1]]
    # the in-run baseline is the shortest stream
    at = f"{lengths[-1]:.0e}_over_{lengths[0]:.0e}".replace("+0", "").replace("+", "")
    # time: the longest stream's late chunks against its early ones (the
    # first holds the warm-up), in the same loop
    longest = chunks[lengths[-1]]
    k = max(1, min(10, (len(longest) - 1) // 2))
    record_ratios(benchmark, {f"ratio_error_{at}": large[0] / small[0],
                              "ratio_time_late_over_early_chunks":
                                  float(np.median(longest[-k:]) / np.median(longest[1:1 + k])),
                              f"ratio_memory_peak_{at}": large[2] / small[2]})
    assert large[2] < 1.25 * small[2], "peak memory grows with the stream's length"
    assert large[0] < small[0], "the error does not fall with the stream's length"
    assert np.isfinite(large[0])
