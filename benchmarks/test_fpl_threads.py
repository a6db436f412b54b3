"""Follow the Perturbed Leader's threads, memory traffic and float32 rows,
as ratios to baselines timed in the same run.

* Threads table: PerturbedLeaderPCA(k=10) at n = 1000 and 2000 on a spiked
  stream, ms per trial on 1 BLAS thread and on the BLAS default (the count
  OpenBLAS started with), with the machine as it is ("idle") and with one
  core kept busy by a busy-loop process this benchmark starts; against
  scipy's top-k ``eigh`` (subset_by_index) of the estimator's perturbed
  matrix at the same BLAS thread count. Two FPLs: "fpl" (the default
  n_jobs=None: the trial loop on every usable core's OpenMP thread) and
  "fpl n_jobs=1" (the caller's thread alone). Contenders interleaved,
  rotated each round, medians; after anything that ran LAPACK on several
  BLAS threads (scipy, the FPLs' first decision) the next contender waits
  0.3 s, for OpenBLAS's threads to stop spinning. "eigh/n_jobs=1" is the
  one-thread ratio at BLAS = 1.
* Traffic: a trial must at least update S and read it once per Krylov product,
  about (3 + products per trial) x n^2/2 x 8 bytes on one triangle. The
  bandwidth is a large array copy (read + write), on one thread and on two
  (the higher counts; the two-thread trial's ratio against the one-thread
  copy alone, a looser floor, is printed beside it), measured
  again before every round of trials: this
  VM's speed moves by 1.5x from one minute to the next, so each round's
  trial time is set against its own minute's bandwidth. The table gives the
  median over rounds of trial time / (bytes / bandwidth) at n = 500, 1000,
  2000, 4000.
* float32: the same stream as float32 rows against float64 rows (n = 1000):
  the kernel reads float32 rows as they are and widens each one as its trial
  starts, so the ratio should be ~1 and no float64 copy of the block is made.

* Krylov product: S @ B for FPL's block of 15 vectors in row panels, one
  thread, by the _skinny.h kernels this build and CPU run (the table names
  the SIMD paths), against dsymm (n = 1000, 2000, 4000).
* One thread's bound: the n_jobs=1 trial against top-k eigh at n = 1000, its
  Krylov products timed alone and set against dgemm's square-block rate,
  and the ratio the trial would reach with its products at that rate.
    pytest benchmarks/test_fpl_threads.py -s               # timed (~1-2 minutes)
    pytest benchmarks/test_fpl_threads.py --benchmark-disable -q   # smoke: small n

Every ratio is also in the benchmark's extra_info as ratio_time_* (times over
their baseline's: lower is better). These are reported, not gated: thread
timings move with the machine's other work; the one-thread FPL trial is
gated by instruction count in benchmarks/gate.py. The busy-loop process
ends with the benchmark, and with the session however it ends
(benchmarks/_busy.py). Rounds scale with --bench-rounds-scale.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import scipy.linalg
from threadpoolctl import threadpool_info, threadpool_limits

from streamfit import PerturbedLeaderPCA
from streamfit.simulate import make_spiked_stream

from ._busy import busy_core
from ._timing import check_components, record_ratios

K = 10
# the BLAS thread count before the session fixture pins one thread
DEFAULT_THREADS = max([lib["num_threads"] for lib in threadpool_info()
                       if lib["user_api"] == "blas"] or [1])

TIMED = {"sizes": (1000, 2000), "trials": 40, "rounds": 5, "eigh_reps": 2,
         "traffic": (500, 1000, 2000, 4000),
         "traffic_trials": {500: 60, 1000: 40, 2000: 12, 4000: 4},
         "traffic_rounds": 5}
SETTLE = 0.3        # seconds after a contender that ran OpenBLAS's own threads
SMOKE = {"sizes": (150,), "trials": 4, "rounds": 1, "eigh_reps": 1,
         "traffic": (100, 150), "traffic_trials": {100: 4, 150: 4}, "traffic_rounds": 1}


def warm(X, n_warm=3, **kw):
    return PerturbedLeaderPCA(K, random_state=0, **kw).partial_fit(X[:n_warm])


def per_trial(est, block):
    start = time.perf_counter()
    est.partial_fit(block)
    return (time.perf_counter() - start) / len(block)


def bandwidth(a, b, reps=3):
    """Bytes per second of copying a into b (read + write counted), best of
    `reps`: (one thread, two threads (halves; numpy's copy releases the GIL))."""
    def halves():
        h = len(a) // 2
        other = threading.Thread(target=np.copyto, args=(b[h:], a[h:]))
        other.start()
        np.copyto(b[:h], a[:h])
        other.join()

    rates = []
    for copy in (lambda: np.copyto(b, a), halves):
        best = np.inf
        for _ in range(reps):
            start = time.perf_counter()
            copy()
            best = min(best, time.perf_counter() - start)
        rates.append(2 * a.nbytes / best)
    return tuple(rates)


def scaled(cfg, bench_rounds, *keys):
    """cfg with its rounds (keys) scaled by --bench-rounds-scale."""
    return dict(cfg, **{key: bench_rounds(cfg[key]) for key in keys})


def test_fpl_threads_traffic_float32(benchmark, timed, publish_table, bench_rounds):
    cfg = scaled(TIMED, bench_rounds, "rounds", "traffic_rounds") if timed else SMOKE
    T, rounds = cfg["trials"], cfg["rounds"]
    thread_counts = sorted({1, DEFAULT_THREADS})
    results, lines, extra = {}, [], {}
    lines.append(f"FPL threads, k = {K}: ms per trial (FPL) / per solve (eigh), medians of "
                 f"{rounds} rounds; 'BLAS': the BLAS thread count ({DEFAULT_THREADS} by "
                 f"default); the trial loop on n_jobs=None ({DEFAULT_THREADS} OpenMP threads "
                 f"here) and n_jobs=1")
    lines.append(f"{'n':>5} {'load':5} {'BLAS':>5} {'fpl':>8} {'n_jobs=1':>9} "
                 f"{'eigh top-k':>11} {'eigh/fpl':>9} {'eigh/n_jobs=1':>14} "
                 f"{'fpl/n_jobs=1':>13}")
    same = True
    for n in cfg["sizes"]:
        X = make_spiked_stream(3 + rounds * T, n, n_spikes=K, random_state=0)
        for load in ("idle", "busy"):
            with busy_core(load == "busy"):
                for threads in thread_counts:
                    with threadpool_limits(limits=threads, user_api="blas"):
                        ests = {"fpl": warm(X), "fpl-1": warm(X, n_jobs=1)}
                        if threads > 1:
                            # the warm-up's first decision is a LAPACK solve on
                            # OpenBLAS's threads, which then spin for ~0.1 s on the
                            # cores the trial loop's OpenMP team needs
                            time.sleep(SETTLE)
                        S = ests["fpl"].perturbed_matrix()
                        names = ["fpl", "fpl-1", "eigh"]
                        for r in range(rounds):
                            block = X[3 + r * T:3 + (r + 1) * T]
                            for name in names[r % 3:] + names[:r % 3]:
                                key = (n, load, threads, name)
                                if name == "eigh":
                                    for _ in range(cfg["eigh_reps"]):
                                        start = time.perf_counter()
                                        scipy.linalg.eigh(S, subset_by_index=[n - K, n - 1],
                                                          driver="evr")
                                        results.setdefault(key, []).append(
                                            time.perf_counter() - start)
                                    if threads > 1:
                                        # OpenBLAS's threads spin for a while after a
                                        # call before they sleep: let them, so the next
                                        # contender meets the load the row names
                                        time.sleep(SETTLE)
                                else:
                                    results.setdefault(key, []).append(
                                        per_trial(ests[name], block))
                        check_components(ests["fpl"], K, n)
                        # the decisions do not depend on n_jobs
                        same = same and np.array_equal(ests["fpl"].components_,
                                                       ests["fpl-1"].components_)
        med = {key: float(np.median(v)) for key, v in results.items() if key[0] == n}
        for load in ("idle", "busy"):
            for threads in thread_counts:
                f, f1, e = (med[n, load, threads, name] for name in ("fpl", "fpl-1", "eigh"))
                lines.append(f"{n:>5} {load:5} {threads:>5} {1e3 * f:8.2f} {1e3 * f1:9.2f} "
                             f"{1e3 * e:11.2f} {e / f:9.1f} {e / f1:14.1f} {f / f1:13.2f}")
                extra[f"ratio_time_fpl_over_eigh_n{n}_{load}_{threads}t"] = f / e
                extra[f"ratio_time_njobs1_over_eigh_n{n}_{load}_{threads}t"] = f1 / e
                extra[f"ratio_time_fpl_over_njobs1_n{n}_{load}_{threads}t"] = f / f1
    lines.append(f"projections identical for n_jobs=None and n_jobs=1: {same}")
    assert same
    n = cfg["sizes"][0]
    X = make_spiked_stream(3 + rounds * T * 2, n, n_spikes=K, random_state=0)

    # --- traffic floor ---------------------------------------------------------
    src = np.ones(1 << 25 if timed else 1 << 20)       # 256 MB (timed): far past L3
    dst = np.empty_like(src)
    lines.append("")
    lines.append("Traffic: floor = (3 + products/trial) x n^2/2 x 8 bytes at the copy bandwidth "
                 "(read + write; the better of 1 and 2 threads) measured before each round; "
                 "time/floor: median over rounds of each round's trial time over its own "
                 f"floor. BLAS on 1 thread, machine as is; the trial loop on 1 thread and on "
                 f"n_jobs = {DEFAULT_THREADS}; 'at 1t GB/s': the {DEFAULT_THREADS}-thread ratio "
                 f"against the one-thread copy alone (a looser floor)")
    lines.append(f"{'n':>5} {'GB/s 1t':>7} {'GB/s 2t':>7} {'ms/trial':>9} {'products':>9} "
                 f"{'floor ms':>9} {'time/floor':>11} {f'ms, {DEFAULT_THREADS} thr':>11} "
                 f"{'time/floor':>11} {'(range)':>11} {'at 1t GB/s':>11} {'speed-up':>9}")
    for m in cfg["traffic"]:
        t = cfg["traffic_trials"][m]
        Xm = make_spiked_stream(3 + cfg["traffic_rounds"] * t, m, n_spikes=K, random_state=1)
        ests = {1: warm(Xm, n_jobs=1), DEFAULT_THREADS: warm(Xm, n_jobs=DEFAULT_THREADS)}
        p0, times, bws = ests[1].solver_stats_["products"], {}, []
        for r in range(cfg["traffic_rounds"]):
            bws.append(bandwidth(src, dst))
            for j in (sorted(ests) if r % 2 == 0 else sorted(ests)[::-1]):
                times.setdefault(j, []).append(
                    per_trial(ests[j], Xm[3 + r * t:3 + (r + 1) * t]))
        prods = (ests[1].solver_stats_["products"] - p0) / (cfg["traffic_rounds"] * t)
        bw1, bw2 = np.array(bws).T
        nbytes = (3 + prods) * m * m / 2 * 8
        floors = nbytes / np.maximum(bw1, bw2)      # the stricter floor: the better copy
        r1 = np.array(times[1]) / floors
        rp = np.array(times[DEFAULT_THREADS]) / floors
        rp1 = np.array(times[DEFAULT_THREADS]) / (nbytes / bw1)   # (the looser floor)
        tt, tp = float(np.median(times[1])), float(np.median(times[DEFAULT_THREADS]))
        lines.append(f"{m:>5} {np.median(bw1) / 1e9:7.1f} {np.median(bw2) / 1e9:7.1f} "
                     f"{1e3 * tt:9.2f} {prods:9.2f} {1e3 * np.median(floors):9.3f} "
                     f"{np.median(r1):11.2f} {1e3 * tp:11.2f} {np.median(rp):11.2f} "
                     f"{f'{rp.min():.2f}-{rp.max():.2f}':>11} {np.median(rp1):11.2f} "
                     f"{tt / tp:9.2f}")
        extra[f"ratio_time_trial_over_floor_n{m}"] = float(np.median(r1))
        extra[f"ratio_time_trial_over_floor_n{m}_{DEFAULT_THREADS}t"] = float(np.median(rp))
        extra[f"ratio_time_trial_over_floor1t_n{m}_{DEFAULT_THREADS}t"] = float(np.median(rp1))
        assert np.array_equal(ests[1].components_, ests[DEFAULT_THREADS].components_)

    # --- float32 rows against float64 rows -------------------------------------
    X32 = X.astype(np.float32)
    X64 = X32.astype(np.float64)
    e32, e64 = warm(X32), warm(X64)
    t32, t64 = [], []
    for r in range(rounds):
        sl = slice(3 + r * T, 3 + (r + 1) * T)
        for name in (("32", "64") if r % 2 == 0 else ("64", "32")):
            if name == "32":
                t32.append(per_trial(e32, X32[sl]))
            else:
                t64.append(per_trial(e64, X64[sl]))
    same32 = np.array_equal(e32.components_, e64.components_)
    r32 = float(np.median(t32) / np.median(t64))
    lines.append("")
    lines.append(f"float32 rows: {1e3 * np.median(t32):.2f} ms/trial against float64 "
                 f"{1e3 * np.median(t64):.2f} (ratio {r32:.2f}); the same decisions as "
                 f"the float64 copy of the rows: {same32}")
    extra["ratio_time_float32_over_float64"] = r32
    assert same32

    record_ratios(benchmark, extra)
    # pytest-benchmark's own line: one FPL call of T trials (1 thread, as is)
    est = warm(X)
    benchmark.pedantic(est.partial_fit, args=(X[3:3 + T],), rounds=1, iterations=1)
    publish_table("\n".join(lines), "fpl_threads.txt")


PRODUCT = {"timed": {"n": (1000, 2000, 4000), "calls": 10, "rounds": 5},
           "smoke": {"n": (400,), "calls": 1, "rounds": 1}}


def test_krylov_product_panels_against_dsymm(benchmark, timed, publish_table, bench_rounds):
    """The Krylov product S @ B (B: 15 vectors, FPL's block at k = 10) in
    row panels by _skinny.h's kernels on one thread, against BLAS's dsymm on
    the same triangle (scipy's, on one BLAS thread: the kernels the BLAS in
    use picks). Interleaved rounds, medians; the results agree to
    rounding."""
    from scipy.linalg.blas import dsymm

    from streamfit._kernels import _simd, _testing
    cfg = scaled(PRODUCT["timed"], bench_rounds, "rounds") if timed else PRODUCT["smoke"]
    calls, rounds = cfg["calls"], cfg["rounds"]
    lines = [f"n | panels ms | dsymm ms | dsymm / panels (SIMD paths: "
             f"{_simd.paths()})", "---|---|---|---"]
    ratios, last = {}, None

    def run():
        nonlocal last
        for n in cfg["n"]:
            rng = np.random.default_rng(n)
            G = rng.standard_normal((n, n))
            S = np.ascontiguousarray(np.tril(G + G.T))
            B = rng.standard_normal((15, n))
            Sf, Bf = np.asfortranarray(S.T), np.asfortranarray(B.T)   # BLAS's upper triangle
            times = {"panels": [], "dsymm": []}
            out = {}
            for r in range(rounds):
                for name in (("panels", "dsymm") if r % 2 == 0 else ("dsymm", "panels")):
                    start = time.perf_counter()
                    for _ in range(calls):
                        out[name] = (_testing.symm_product(S, B, 1) if name == "panels"
                                     else dsymm(1.0, Sf, Bf, lower=0).T)
                    times[name].append((time.perf_counter() - start) / calls)
            full = np.tril(S) + np.tril(S, -1).T
            tol = 1e-12 * np.abs(full).sum(1).max()
            np.testing.assert_allclose(out["panels"], out["dsymm"], rtol=0, atol=tol)
            fast, blas = np.median(times["panels"]), np.median(times["dsymm"])
            ratios[f"ratio_speedup_panels_vs_dsymm_n{n}"] = blas / fast
            lines.append(f"{n} | {fast * 1e3:.2f} | {blas * 1e3:.2f} | {blas / fast:.2f}x")
        last = lines

    benchmark.pedantic(run, rounds=1, iterations=1)
    record_ratios(benchmark, ratios)
    publish_table("\n".join(last), "krylov_product.txt")


BOUND = {"timed": {"n": 1000, "trials": 60, "rounds": 7, "calls": 20},
         "smoke": {"n": 150, "trials": 4, "rounds": 1, "calls": 1}}


def test_fpl_one_thread_against_its_flop_bound(benchmark, timed, publish_table, bench_rounds):
    """How far one thread's trial is from what this core allows: FPL
    (n_jobs=1, BLAS on 1 thread) against scipy's top-k ``eigh``, with the
    trial's Krylov products timed alone (S @ block by _skinny.h's kernels,
    S in cache) and set against dgemm's rate on square blocks (1000 x 1000,
    the core's best in BLAS, on the instruction set OpenBLAS picked). 'at
    dgemm's rate' is the trial with its products at that rate and the rest
    as measured: the one-thread ratio the trial's arithmetic leaves room for.
    Interleaved rounds, medians."""
    from streamfit._kernels import _simd, _testing
    cfg = scaled(BOUND["timed"], bench_rounds, "rounds") if timed else BOUND["smoke"]
    n, T, rounds, calls = cfg["n"], cfg["trials"], cfg["rounds"], cfg["calls"]
    X = make_spiked_stream(3 + rounds * T, n, n_spikes=K, random_state=0)
    est = warm(X, n_jobs=1)
    b = est._state.block_.shape[0]         # (the state object's solver block)
    S = est.perturbed_matrix()
    B = np.random.default_rng(n).standard_normal((b, n))
    G = np.random.default_rng(0).standard_normal((1000, 1000))
    p0 = est.solver_stats_["products"]
    names = ["trial", "eigh", "product", "dgemm"]
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % 4:] + names[:r % 4]:
            if name == "trial":
                times[name].append(per_trial(est, X[3 + r * T:3 + (r + 1) * T]))
                continue
            start = time.perf_counter()
            reps = calls if name == "product" else 1
            for _ in range(reps):
                if name == "eigh":
                    scipy.linalg.eigh(S, subset_by_index=[n - K, n - 1], driver="evr")
                elif name == "product":
                    out = _testing.symm_product(S, B, 1)
                else:
                    G @ G
            times[name].append((time.perf_counter() - start) / reps)
    check_components(est, K, n)
    np.testing.assert_allclose(out, B @ S, rtol=0, atol=1e-12 * np.abs(S).sum(1).max())
    products = (est.solver_stats_["products"] - p0) / (rounds * T)
    assert products > 0, "the trials ran no Krylov product"
    med = {name: float(np.median(v)) for name, v in times.items()}
    rate = 2.0 * 1000 ** 3 / med["dgemm"]
    flops = 2.0 * n * n * b
    in_products = products * med["product"]
    bound = med["trial"] - in_products + products * flops / rate
    lines = [f"FPL one thread (n_jobs=1, BLAS 1 thread), n = {n}, k = {K}, block {b}; "
             f"SIMD paths {_simd.paths()}; medians of {rounds} rounds",
             f"trial {1e3 * med['trial']:.3f} ms; eigh top-{K} {1e3 * med['eigh']:.2f} ms; "
             f"eigh / trial {med['eigh'] / med['trial']:.1f}x",
             f"Krylov products: {products:.2f} a trial, {1e3 * med['product']:.3f} ms each "
             f"({flops / med['product'] / 1e9:.1f} GFLOP/s, {flops / med['product'] / rate:.0%} "
             f"of dgemm's {rate / 1e9:.1f} GFLOP/s): {in_products / med['trial']:.0%} of the trial",
             f"the trial with its products at dgemm's rate: {1e3 * bound:.3f} ms, eigh / that "
             f"{med['eigh'] / bound:.1f}x"]
    record_ratios(benchmark, {
        "ratio_time_trial_over_eigh_1t": med["trial"] / med["eigh"],
        "ratio_time_product_over_dgemm_rate": med["product"] / (flops / rate),
        "ratio_time_bound_over_eigh_1t": bound / med["eigh"]})
    benchmark.pedantic(est.partial_fit, args=(X[3:3 + T],), rounds=1, iterations=1)
    publish_table("\n".join(lines), "fpl_bound.txt")
