"""stream_fit throughput against partial_fit in memory on the same chunks: what
moving the state to the data costs per chunk.

Workload: ``OnlineQuantileRegressor(0.5, average=True)`` (single-sample
updates, d = 100) and ``PerturbedLeaderPCA(5)`` (n = 100), on a stream of
N rows cut into chunks of c rows, c over a few sizes. The chunks are made on
the workers and persisted there before timing (so that neither side pays
for making them); the in-memory contender holds the same chunks as NumPy
arrays in this process (BLAS pinned to one thread) and calls partial_fit
on each in turn. stream_fit runs on a LocalCluster of 2 single-threaded
worker processes.

Reported per chunk size: median seconds of both (interleaved rounds),
throughput ratio (in-memory time / stream_fit time) and the per-chunk
overhead (stream_fit time - in-memory time) / chunks: the pickling of the
state on each side, the scheduler's round trips and the client's pipeline.
Every round also checks that both fits are the same, bit for bit.

Sizes: ``STREAMFIT_BENCH_FULL=1``: N = 10^6 rows (QR), 2 * 10^4 (PCA);
default N = 2 * 10^5 and 10^4; under ``--benchmark-disable`` small, one round.

    pytest benchmarks -k dask_stream -s
    STREAMFIT_BENCH_FULL=1 pytest benchmarks -k dask_stream -s

Timed runs write the table to .benchmarks/dask_stream.txt; the throughput ratios
are in extra_info (ratio_speedup_stream_fit_vs_memory_chunk<c>, see
benchmarks/compare.py).
"""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from dask import delayed  # noqa: E402

from streamfit import OnlineQuantileRegressor, PerturbedLeaderPCA  # noqa: E402
from streamfit.dask import stream_fit  # noqa: E402
from streamfit.simulate import make_linear_stream, make_spiked_stream  # noqa: E402

from ._timing import clock, fmt_x, interleave, record_ratios  # noqa: E402

FULL = os.environ.get("STREAMFIT_BENCH_FULL") == "1"
D = 100
CASES = {   # estimator -> (rows, chunk sizes)
    "qr": (1_000_000 if FULL else 200_000, (1_000, 10_000, 100_000)),
    "fpl": (20_000 if FULL else 10_000, (200, 1_000, 5_000)),
}
SMOKE = {"qr": (20_000, (1_000, 10_000)), "fpl": (1_000, (200, 1_000))}
ROUNDS, SMOKE_ROUNDS = 5, 1


def make(name):
    if name == "qr":
        return OnlineQuantileRegressor(0.5, average=True)
    return PerturbedLeaderPCA(5, random_state=0)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0",
                                  silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)
        client.run(lambda: (__import__("streamfit.dask"), __import__("streamfit.simulate")))
        yield client


@pytest.fixture(scope="module")
def results(publish_table):
    results = {}
    yield results
    if results:
        publish_table(table(results), "dask_stream.txt")


def chunks_on_workers(client, name, rows, chunk):
    """The stream's chunks, made and persisted on the workers (as Dask arrays),
    and the same chunks here (NumPy)."""
    # streamfit's own generators run on the workers, chunk i from seed i
    beta = np.linspace(-1.0, 1.0, D)
    parts = []
    for i, start in enumerate(range(0, rows, chunk)):
        n = min(chunk, rows - start)
        if name == "qr":
            X, y, _ = delayed(make_linear_stream, nout=3, pure=False)(
                n, D, tau=0.5, beta=beta, random_state=i)
            parts.append((da.from_delayed(X, (n, D), dtype=float),
                          da.from_delayed(y, (n,), dtype=float)))
        else:
            X = delayed(make_spiked_stream, pure=False)(n, D, n_spikes=5, random_state=i)
            parts.append((da.from_delayed(X, (n, D), dtype=float),))
    arrays = [da.concatenate([p[j] for p in parts]) for j in range(len(parts[0]))]
    arrays = client.persist(arrays)
    with client.as_current():
        distributed.wait(arrays)
    local = client.compute(arrays, sync=True)
    return arrays, [tuple(a[s:s + chunk] for a in local) for s in range(0, rows, chunk)]


@pytest.mark.parametrize("name", list(CASES))
def test_stream_fit_throughput(benchmark, client, timed, results, name):
    rows, sizes = CASES[name] if timed else SMOKE[name]
    rounds = ROUNDS if timed else SMOKE_ROUNDS
    for chunk in sizes:
        arrays, local = chunks_on_workers(client, name, rows, chunk)
        times = {"memory": [], "stream_fit": []}
        fits = {}

        def in_memory():
            est = make(name)
            for args in local:
                est.partial_fit(*args)
            fits["memory"] = est

        def on_cluster():
            fits["stream_fit"] = stream_fit(make(name), *arrays, client=client)

        def call(contender, r):
            clock(times[contender], in_memory if contender == "memory" else on_cluster)

        benchmark.group = f"dask stream_fit {name}: {rows} rows"
        if chunk == sizes[-1]:
            interleave(benchmark, rounds, "stream_fit", ["memory"], call)
        else:       # one pytest-benchmark entry per test: the other sizes clock themselves
            for r in range(rounds):
                for contender in (["memory", "stream_fit"] if r % 2 == 0
                                  else ["stream_fit", "memory"]):
                    call(contender, r)
        ref, got = fits["memory"], fits["stream_fit"]
        assert (np.array_equal(ref.coef_, got.coef_) if name == "qr"
                else np.array_equal(ref.components_, got.components_))
        n_chunks = len(local)
        med = {k: float(np.median(v)) for k, v in times.items()}
        results[(name, chunk)] = dict(rows=rows, chunks=n_chunks, med=med, rounds=rounds,
                                      overhead=(med["stream_fit"] - med["memory"]) / n_chunks)
        record_ratios(benchmark, {f"ratio_speedup_stream_fit_vs_memory_chunk{chunk}":
                                  med["memory"] / med["stream_fit"]})
        del arrays, local          # releases the persisted chunks


def table(results):
    lines = ["stream_fit against partial_fit in memory on the same chunks (persisted on the "
             "workers); LocalCluster 2 worker processes x 1 thread; medians of interleaved "
             "rounds",
             f"{'estimator':<10}{'rows':>9}{'chunk':>8}{'chunks':>8}{'memory s':>10}"
             f"{'stream s':>10}{'throughput':>12}{'ms/chunk':>10}"]
    for (name, chunk), r in sorted(results.items()):
        label = {"qr": "QR avg", "fpl": "FPL k=5"}[name]
        lines.append(f"{label:<10}{r['rows']:>9}{chunk:>8}{r['chunks']:>8}"
                     f"{r['med']['memory']:>10.3f}{r['med']['stream_fit']:>10.3f}"
                     f"{fmt_x(r['med']['memory'] / r['med']['stream_fit']):>12}"
                     f"{r['overhead'] * 1e3:>10.2f}")
    lines.append(f"d = n = {D}; throughput = memory time / stream_fit time; ms/chunk = "
                 f"(stream_fit - memory) / chunks")
    return "\n".join(lines)
