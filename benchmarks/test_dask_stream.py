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
are in extra_info (ratio_speedup_stream_fit_vs_memory_chunk<c>), reported, not
gated: they move with the machine's other work (the Dask task's own cost is
gated by instruction count in benchmarks/gate.py).
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

from ._timing import clock, fmt_x, interleave, missed, record_ratios  # noqa: E402

FULL = os.environ.get("STREAMFIT_BENCH_FULL") == "1"
D = 100
CASES = {   # estimator -> (rows, chunk sizes)
    "qr": (2_000_000 if FULL else 1_000_000, (1_000, 10_000, 100_000)),
    "fpl": (20_000 if FULL else 10_000, (200, 1_000, 5_000)),
}
SMOKE = {"qr": (20_000, (1_000, 10_000)), "fpl": (1_000, (200, 1_000))}
# rows of a stored partition (made on one worker, then cut into chunks)
PART = {"qr": 100_000, "fpl": 5_000}
# the floors: stream_fit throughput / in-memory partial_fit's (QR avg)
FLOORS = {1_000: 0.2, 10_000: 0.5}
CHECK_FLOORS = os.environ.get("STREAMFIT_BENCH_FLOORS") == "1"
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


def _cut(arrays, chunk):
    return [tuple(a[s:s + chunk] for a in arrays) for s in range(0, arrays[0].shape[0], chunk)]


def chunks_on_workers(client, name, rows, chunk):
    """The stream's chunks, made and persisted on the workers (as Dask arrays),
    and the same chunks here (NumPy). The stream is stored as partitions of
    PART[name] rows, made on the workers in turn (partition p on worker p
    mod 2), each cut into chunks of ``chunk`` rows on the worker that made it:
    runs of consecutive chunks on one worker, as a stream loaded in large
    partitions and fed in small chunks lies in a cluster. The placement is
    the benchmark's own (pinned), not the scheduler's."""
    import operator

    workers = sorted(client.nthreads())
    beta = np.linspace(-1.0, 1.0, D)
    pieces = []
    part = PART[name]
    for p, start in enumerate(range(0, rows, part)):
        n = min(part, rows - start)
        on = [workers[p % len(workers)]]
        # streamfit's own generators run on the workers, partition p from seed p
        if name == "qr":
            made = client.submit(make_linear_stream, n, D, tau=0.5, beta=beta, random_state=p,
                                 workers=on, pure=False)
            shapes = [(D,), ()]
        else:
            made = client.submit(_spiked, n, D, p, workers=on, pure=False)
            shapes = [(D,)]
        for s in range(0, n, chunk):
            c = min(chunk, n - s)
            parts = client.submit(_cut_one, made, s, c, len(shapes), workers=on, pure=False)
            pieces.append([da.from_delayed(delayed(client.submit(operator.getitem, parts, j,
                                                                 workers=on, pure=False)),
                                           (c,) + shape, dtype=float)
                           for j, shape in enumerate(shapes)])
        del made
    arrays = [da.concatenate([p[j] for p in pieces]) for j in range(len(pieces[0]))]
    arrays = client.persist(arrays)
    with client.as_current():
        distributed.wait(distributed.futures_of(arrays))
    del pieces
    local = [np.concatenate(client.gather(sorted(distributed.futures_of(a), key=lambda f: f.key)))
             for a in arrays]
    who = client.who_has(distributed.futures_of(arrays[0]))
    held = [min(who[f.key]) for f in sorted(distributed.futures_of(arrays[0]),
                                            key=lambda f: f.key)]
    switches = sum(a != b for a, b in zip(held, held[1:]))
    return arrays, _cut(local, chunk), switches


def _spiked(n, d, seed):
    return (make_spiked_stream(n, d, n_spikes=5, random_state=seed),)


def _cut_one(made, start, rows, parts):
    return tuple(made[j][start:start + rows] for j in range(parts))


@pytest.mark.parametrize("name", list(CASES))
def test_stream_fit_throughput(benchmark, client, timed, results, name, bench_rounds):
    rows, sizes = CASES[name] if timed else SMOKE[name]
    rounds = bench_rounds(ROUNDS) if timed else SMOKE_ROUNDS
    for chunk in sizes:
        arrays, local, switches = chunks_on_workers(client, name, rows, chunk)
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
                                      overhead=(med["stream_fit"] - med["memory"]) / n_chunks,
                                      switches=switches, load=os.getloadavg()[0],
                                      times=times)
        record_ratios(benchmark, {f"ratio_speedup_stream_fit_vs_memory_chunk{chunk}":
                                  med["memory"] / med["stream_fit"]})
        del arrays, local          # releases the persisted chunks
    if CHECK_FLOORS and timed and name == "qr":
        failures = missed([(f"stream_fit / memory at {c}-row chunks",
                            results[(name, c)]["med"]["memory"]
                            / results[(name, c)]["med"]["stream_fit"], bound, True)
                           for c, bound in FLOORS.items() if (name, c) in results])
        assert not failures, failures


def table(results):
    lines = ["stream_fit against partial_fit in memory on the same chunks (persisted on the "
             "workers, stored as partitions of "
             + ", ".join(f"{PART[k]} rows ({k})" for k in PART)
             + " on the workers in turn, cut into chunks there); LocalCluster 2 worker "
             "processes x 1 thread; medians of interleaved rounds",
             f"{'estimator':<10}{'rows':>9}{'chunk':>8}{'chunks':>8}{'switches':>9}"
             f"{'memory s':>10}{'stream s':>10}{'throughput':>12}{'ms/chunk':>10}{'load':>6}"]
    for (name, chunk), r in sorted(results.items()):
        label = {"qr": "QR avg", "fpl": "FPL k=5"}[name]
        lines.append(f"{label:<10}{r['rows']:>9}{chunk:>8}{r['chunks']:>8}{r['switches']:>9}"
                     f"{r['med']['memory']:>10.3f}{r['med']['stream_fit']:>10.3f}"
                     f"{fmt_x(r['med']['memory'] / r['med']['stream_fit']):>12}"
                     f"{r['overhead'] * 1e3:>10.2f}{r['load']:>6.1f}")
    lines.append(f"d = n = {D}; throughput = memory time / stream_fit time (floors, QR: "
                 + ", ".join(f">= {b}x at {c}-row chunks" for c, b in FLOORS.items())
                 + "); ms/chunk = (stream_fit - memory) / chunks; switches: consecutive "
                 "chunks on different workers (the state's hops); load: 1-min load average "
                 "(shared machine) after the size's rounds")
    lines.append("seconds per round: " + "; ".join(
        f"{name} {chunk}: memory " + ", ".join(f"{t:.3f}" for t in r["times"]["memory"])
        + " stream " + ", ".join(f"{t:.3f}" for t in r["times"]["stream_fit"])
        for (name, chunk), r in sorted(results.items())))
    return "\n".join(lines)
