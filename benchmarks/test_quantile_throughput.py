"""Throughput of per-sample online quantile regression: ours against baselines.

Workload: d = 100, float64, tau = 0.5, one pass of single-sample updates over
rows X ~ N(0, I), y from ``make_linear_stream``. Contenders: ours (default
statistical schedule and ConstantSchedule(1e-3)), a NumPy per-sample loop,
Vowpal Wabbit, river and a plain C loop, in two groups each timed in one
loop of interleaved rounds (every contender once a round, the order rotated;
7 rounds, scaled by --bench-rounds-scale; medians): ours, VW and the C loop
on all the rows; ours, the NumPy loop and river on a prefix of them (the slow
Python baselines). Everything is compared per sample. A baseline whose
package (vowpalwabbit, river) or compiler is missing is left out of its loop.

    pytest benchmarks -s                          # timed; prints the ratio table
    STREAMFIT_BENCH_FLOORS=1 pytest benchmarks    # also asserts the issue's floors
    pytest benchmarks --benchmark-disable -q      # smoke test: one run each, less data

Timed runs also write the table to .benchmarks/quantile_ratios.txt; each
group's entry holds ours' speed-ups over its baselines in extra_info
(ratio_speedup_<ours>_vs_<baseline>), reported for people to read: the
regression gate is benchmarks/gate.py.

float32 against float64: the same stream (d = 100, default
statistical schedule) of 100,000 and 300,000 rows as float32 rows, read as
they are, against the same values as float64 rows, and against the float32
rows converted to float64 first (what every mode did before, and batch,
storage and several taus still do); interleaved rounds, medians of wall and
of CPU time (process time: it leaves out the time a loaded machine runs
other processes), ratios in ``extra_info`` (``ratio_time_float32_vs_float64``, wall;
``ratio_time_cpu_float32_vs_float64``, CPU; the same for the converted
path) and in the table. All three must give bit-identical coefficients.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from streamfit import OnlineQuantileRegressor
from streamfit.schedules import ConstantSchedule
from streamfit.simulate import make_linear_stream

from ._timing import interleave, parametrize_sizes, record_ratios

D = 100
TAU = 0.5
ETA = 1e-3
ROWS = {"main": 100_000, "numpy": 5_000, "river": 2_000}          # timed runs
SMOKE_ROWS = {"main": 10_000, "numpy": 1_000, "river": 500}       # --benchmark-disable
RTOL_SAME = 1e-10       # same update in float64: only summation order differs
RTOL_VW = 1e-3          # VW stores features and weights in float32

# Floors from the issue, as throughput ratios (baseline ns / ours ns).
FLOORS = {"numpy": 40.0, "vw": 3.0, "river": 100.0, "c": 0.5}
BASELINES = {"numpy": "NumPy loop", "vw": "VW", "river": "river", "c": "C loop"}
OURS = {"ours_statistical": "ours (statistical)", "ours_constant": "ours (ConstantSchedule)"}

# VW's index of its constant (intercept) feature, `constant` in vw's constant.h.
VW_CONSTANT = 11650396


# float32 against float64: rows of the stream (timed, smoke) and rounds
F32_ROWS = (100_000, 300_000)
F32_SMOKE_ROWS = (10_000,)
F32_ROUNDS = 7
F32_CONTENDERS = {"float64": "float64 rows", "float32": "float32 rows (read as float32)",
                  "float32_converted": "float32 rows converted to float64 first"}


def _group(n):
    # One group per workload and row count, so a group's times are comparable.
    return f"quantile single-sample d={D}, {n} rows"


def pytest_generate_tests(metafunc):
    parametrize_sizes(metafunc, F32_SMOKE_ROWS, f32_rows=F32_ROWS)


# -- data and references -------------------------------------------------------

@pytest.fixture(scope="module")
def rows(timed):
    return ROWS if timed else SMOKE_ROWS


@pytest.fixture(scope="module")
def stream(rows):
    X, y, beta = make_linear_stream(rows["main"], D, tau=TAU, random_state=0)
    return X, y, beta


def numpy_quantile_sgd(X, y, eta=ETA, tau=TAU):
    """The kernel's constant-step update as a NumPy per-sample loop (the oracle)."""
    w = np.zeros(X.shape[1])
    b = 0.0
    for x_i, y_i in zip(X, y.tolist()):
        g = (1.0 if y_i <= x_i @ w + b else 0.0) - tau
        w -= (eta * g) * x_i        # w -= eta * g * x_i, one temporary
        b -= eta * g
    return w, b


def ours_constant(X, y):
    est = OnlineQuantileRegressor(TAU, fit_intercept=True, schedule=ConstantSchedule(ETA))
    return est.fit(X, y)


@pytest.fixture(scope="module")
def reference(stream):
    """NumPy-loop coefficients and intercept on all rows (not timed)."""
    X, y, _ = stream
    return numpy_quantile_sgd(X, y)


def assert_same_fit(coef, intercept, ref_coef, ref_intercept, rtol):
    got = np.append(coef, intercept)
    want = np.append(ref_coef, ref_intercept)
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert err <= rtol, f"relative distance {err:.3g} to the reference exceeds {rtol:g}"


# -- timing ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def results():
    """name -> (median ns/sample, min ns/sample, rows, rounds), filled by the benchmarks."""
    return {}


MAIN_ROUNDS = 7         # interleaved rounds (--bench-rounds-scale scales them)
PREFIX_ROUNDS = 7


def run_interleaved(benchmark, results, rounds, contenders, timed_name):
    """Every contender once a round, in a rotating order (benchmarks/_timing.py's
    interleave; pytest-benchmark times `timed_name`): contenders maps a name to
    (function, rows); each round's time per sample is recorded, then the
    median and min over rounds go into results[name]. Returns the last
    result of each contender."""
    times = {name: [] for name in contenders}
    last = {}

    def call(name, r):
        fn, n_rows = contenders[name]
        start = time.perf_counter()
        last[name] = fn()
        times[name].append((time.perf_counter() - start) / n_rows * 1e9)

    interleave(benchmark, rounds, timed_name, [n for n in contenders if n != timed_name], call)
    for name, ns in times.items():
        assert len(ns) == rounds, (name, len(ns))
        results[name] = (float(np.median(ns)), float(np.min(ns)), contenders[name][1], rounds)
        benchmark.extra_info[f"median_ns_per_sample_{name}"] = results[name][0]
    benchmark.extra_info["rounds"] = rounds
    return last


def record_speedups(benchmark, results, bases):
    record_ratios(benchmark, {f"ratio_speedup_{ours.removeprefix('ours_')}_vs_{base}":
                              speedup(results, base, ours) for base in bases for ours in OURS})


# Ours, VW and the C loop on all the rows; ours again, the NumPy loop and
# river on a prefix (the slow Python baselines), each group in one loop of
# interleaved rounds, so that the machine's load changes hit every
# contender alike. On the prefix a per-sample ratio compares the same rows
# in the same cache state (100,000 rows of d = 100 are 80 MB, streamed from
# memory at ~85 ns a row on these machines; 5,000 rows stay in cache).

@pytest.mark.benchmark(group=_group(ROWS["main"]))
def test_all_rows(benchmark, results, stream, reference, vw_cache, c_quantile_sgd,
                  bench_rounds):
    X, y, beta = stream
    contenders = {"ours_statistical": (lambda: OnlineQuantileRegressor(TAU).fit(X, y),
                                       len(y)),
                  "ours_constant": (lambda: ours_constant(X, y), len(y))}
    if vw_cache is not None:
        contenders["vw"] = (vw_runner(vw_cache), len(y))
    if c_quantile_sgd is not None:
        contenders["c"] = (lambda: c_quantile_sgd(X, y), len(y))
    last = run_interleaved(benchmark, results, bench_rounds(MAIN_ROUNDS), contenders,
                           "ours_statistical")
    benchmark.extra_info["rows"] = len(y)
    record_speedups(benchmark, results, [b for b in ("vw", "c") if b in contenders])

    est = last["ours_statistical"]
    assert est.n_samples_seen_ == len(y)
    # 0.004 at 10,000 rows, 0.001 at 100,000 (t_1.1 noise, ||beta|| = 143)
    err = np.linalg.norm(est.coef_ - beta) / np.linalg.norm(beta)
    assert err < 0.01, f"relative coefficient error {err:.3g}"
    est = last["ours_constant"]
    assert est.n_updates_ == len(y)
    assert_same_fit(est.coef_, est.intercept_, *reference, RTOL_SAME)
    if "vw" in last:
        coef, intercept, log = last["vw"]
        assert vw_examples(log) == len(y)
        assert_same_fit(coef, intercept, *reference, RTOL_VW)
    if "c" in last:
        assert_same_fit(*last["c"], *reference, RTOL_SAME)


@pytest.mark.benchmark(group=_group(ROWS["numpy"]))
def test_prefix_rows(benchmark, results, stream, rows, bench_rounds):
    X, y, _ = stream
    Xp, yp = X[:rows["numpy"]], y[:rows["numpy"]]
    contenders = {"ours_statistical_prefix": (lambda: OnlineQuantileRegressor(TAU).fit(Xp, yp),
                                              len(yp)),
                  "ours_constant_prefix": (lambda: ours_constant(Xp, yp), len(yp)),
                  "numpy": (lambda: numpy_quantile_sgd(Xp, yp), len(yp))}
    river = river_runner(X[:rows["river"]], y[:rows["river"]])
    if river is not None:
        contenders["river"] = (river, rows["river"])
    last = run_interleaved(benchmark, results, bench_rounds(PREFIX_ROUNDS), contenders,
                           "ours_constant_prefix")
    benchmark.extra_info["rows"] = len(yp)
    record_speedups(benchmark, results, [b for b in ("numpy", "river") if b in contenders])

    assert last["ours_statistical_prefix"].n_updates_ == len(yp) - 50   # the 50-row warm-up
    est = last["ours_constant_prefix"]
    assert_same_fit(est.coef_, est.intercept_, *numpy_quantile_sgd(Xp, yp), RTOL_SAME)
    assert_same_fit(*last["numpy"], est.coef_, est.intercept_, RTOL_SAME)
    if "river" in last:
        model = last["river"]
        Xr, yr = X[:rows["river"]], y[:rows["river"]]
        coef = np.array([model.weights.get(j, 0.0) for j in range(D)])
        ref = ours_constant(Xr, yr)
        assert_same_fit(coef, model.intercept, ref.coef_, ref.intercept_, RTOL_SAME)


# -- baselines -------------------------------------------------------------------

# Plain SGD with a constant stepsize: the same update as ours (VW's default
# adaptive, normalized, invariant updates do more work per feature). An
# intercept (VW's constant feature) as ours. No --quiet: it also drops the
# example count. (VW's -q is --quadratic, not quiet.)
VW_ARGS = ["--loss_function", "quantile", "--quantile_tau", str(TAU),
           "--sgd", "--learning_rate", str(ETA), "--power_t", "0"]


@pytest.fixture(scope="module")
def vw_cache(stream):
    """VW's cache file of the stream, written once (text, then a parsing run);
    None when vowpalwabbit is not installed (the VW baseline is then left out)."""
    try:
        import vowpalwabbit as vw
    except ImportError:
        yield None
        return
    X, y, _ = stream
    # "%.17g" round-trips float64; VW parses it to float32 anyway.
    line = "%.17g |f " + " ".join(f"{j}:%.17g" for j in range(D)) + "\n"
    with tempfile.TemporaryDirectory(prefix="streamfit-vw-") as tmp:
        data, cache = Path(tmp) / "train.vw", Path(tmp) / "train.cache"
        with open(data, "w") as f:
            f.writelines(line % tuple(r) for r in np.column_stack([y, X]).tolist())
        ws = vw.Workspace(arg_list=[*VW_ARGS, "-d", str(data), "--cache_file", str(cache)],
                          enable_logging=True)
        ws.finish()
        assert vw_examples(ws.get_log()) == len(y)
        data.unlink()           # the timed runs read the cache only
        yield vw, str(cache)


def vw_examples(log_lines):
    found = re.search(r"^number of examples\s*=\s*(\d+)", "\n".join(log_lines), re.MULTILINE)
    assert found, "VW reported no example count:\n" + "\n".join(log_lines)
    return int(found.group(1))


def vw_runner(vw_cache):
    vw, cache = vw_cache
    # The vowpalwabbit wheel ships no `vw` binary; Workspace runs the same
    # driver in-process. Its Python layer runs the parser only when the
    # arguments contain -d/--data/--passes, hence --passes 1.
    args = [*VW_ARGS, "--cache_file", cache, "--passes", "1"]

    def run():
        ws = vw.Workspace(arg_list=args, enable_logging=True)
        coef = np.array([ws.get_weight_from_name(str(j), "f") for j in range(D)])
        intercept = ws.get_weight(VW_CONSTANT)
        ws.finish()
        return coef, intercept, ws.get_log()
    return run


def river_runner(X, y):
    """river's LinearRegression with the same update, learn_one on dicts (its
    native input) over the rows; None when river is not installed."""
    try:
        from river import linear_model, optim
    except ImportError:
        return None
    dicts = [dict(enumerate(r)) for r in X.tolist()]
    targets = y.tolist()

    def run():
        model = linear_model.LinearRegression(optimizer=optim.SGD(ETA),
                                              loss=optim.losses.Quantile(TAU),
                                              intercept_lr=ETA)
        for x_i, y_i in zip(dicts, targets):
            model.learn_one(x_i, y_i)
        return model
    return run


@pytest.fixture(scope="module")
def c_quantile_sgd(compile_c):
    """The plain C loop (benchmarks/quantile_sgd.c); None without a C compiler."""
    if shutil.which(os.environ.get("CC", "cc")) is None:
        return None
    lib = compile_c("quantile_sgd.c")
    dp = ctypes.POINTER(ctypes.c_double)
    fn = lib.quantile_sgd
    fn.argtypes = [ctypes.c_ssize_t, ctypes.c_ssize_t, dp, dp, ctypes.c_double,
                   ctypes.c_double, ctypes.c_int, dp, dp]
    fn.restype = None

    def fit(X, y):
        X = np.ascontiguousarray(X, dtype=np.float64)
        y = np.ascontiguousarray(y, dtype=np.float64)
        w = np.zeros(X.shape[1])
        b = ctypes.c_double(0.0)
        fn(X.shape[0], X.shape[1], X.ctypes.data_as(dp), y.ctypes.data_as(dp), TAU, ETA, 1,
           w.ctypes.data_as(dp), ctypes.byref(b))
        return w, b.value

    return fit


# -- float32 rows against float64 rows --------------------------------------------------

@pytest.mark.benchmark(group="quantile float32 vs float64")
def test_float32_against_float64(benchmark, results, timed, f32_rows, bench_rounds):
    n = f32_rows
    X, y, beta = make_linear_stream(n, D, tau=TAU, random_state=1)
    X32 = X.astype(np.float32)
    X64 = X32.astype(np.float64)        # the same values: the same fit, bit for bit
    del X
    wall = {name: [] for name in F32_CONTENDERS}
    cpu = {name: [] for name in F32_CONTENDERS}
    coef = {}

    def call(name, r):
        est = OnlineQuantileRegressor(TAU)
        start, start_cpu = time.perf_counter(), time.process_time()
        if name == "float64":
            est.fit(X64, y)
        elif name == "float32":
            est.fit(X32, y)
        else:
            est.fit(X32.astype(np.float64), y)
        cpu[name].append(time.process_time() - start_cpu)
        wall[name].append(time.perf_counter() - start)
        coef[name] = est.coef_

    interleave(benchmark, bench_rounds(F32_ROUNDS), "float32",
               ["float64", "float32_converted"], call)
    assert coef["float32"].tobytes() == coef["float64"].tobytes() == \
        coef["float32_converted"].tobytes()
    err = np.linalg.norm(coef["float32"] - beta) / np.linalg.norm(beta)
    assert err < 0.01, f"relative coefficient error {err:.3g}"
    ns = {name: (float(np.median(wall[name])) / n * 1e9, float(np.median(cpu[name])) / n * 1e9)
          for name in F32_CONTENDERS}
    results[("float32", n)] = (ns, len(wall["float32"]))
    extra = benchmark.extra_info
    extra["rows"] = n
    for name in F32_CONTENDERS:
        extra[f"median_ns_per_row_{name}"] = ns[name][0]
        extra[f"median_cpu_ns_per_row_{name}"] = ns[name][1]
    for name in ("float32", "float32_converted"):
        record_ratios(benchmark, {
            f"ratio_time_{name}_vs_float64": ns[name][0] / ns["float64"][0],
            f"ratio_time_cpu_{name}_vs_float64": ns[name][1] / ns["float64"][1]})


def float32_table(results, timed):
    sizes = sorted(key[1] for key in results if isinstance(key, tuple) and key[0] == "float32")
    if not sizes:
        return ""
    ns = {n: results[("float32", n)][0] for n in sizes}      # name -> (wall, cpu) ns/row
    rounds = results[("float32", sizes[0])][1]
    lines = [f"float32 against float64 rows: d={D}, tau={TAU}, statistical schedule, one pass "
             f"({rounds} interleaved round{'s' if rounds != 1 else ''}, medians"
             f"{'' if timed else '; --benchmark-disable: indicative only'})", "",
             f"{'ns per row (wall, CPU)':44s}" + "".join(f"{n:>16,d}" for n in sizes)]
    for name, label in F32_CONTENDERS.items():
        lines.append(f"{label:44s}" + "".join(f"{ns[n][name][0]:>8.1f}{ns[n][name][1]:>8.1f}"
                                              for n in sizes))
    for name in ("float32", "float32_converted"):
        cells = [(ns[n][name][0] / ns[n]["float64"][0], ns[n][name][1] / ns[n]["float64"][1])
                 for n in sizes]
        lines.append(f"{'ratio ' + name + ' / float64':44s}" +
                     "".join(f"{a:>7.2f}x{c:>7.2f}x" for a, c in cells))
    return "\n".join(lines)


# -- ratios --------------------------------------------------------------------------

# Baselines timed on a prefix of the rows are compared with ours on that prefix.
PREFIX_BASELINES = ("numpy", "river")


def speedup(results, base, ours, stat=0):
    """Throughput ratio of ours over a baseline, from median (stat=0) or min (1)
    times per sample; None if either was not run."""
    if base in PREFIX_BASELINES:
        ours += "_prefix"
    if base in results and ours in results:
        return results[base][stat] / results[ours][stat]
    return None


def ratio_table(results, timed):
    how = "median of timed rounds" if timed else \
        "ONE run each under --benchmark-disable: indicative only"
    lines = [f"Online quantile regression, single-sample updates: d={D}, float64, "
             f"tau={TAU}, one pass ({how})", "",
             f"{'ns per sample':26s}{'rows':>8s}{'rounds':>8s}{'median':>10s}{'min':>10s}"]
    prefix = {f"{k}_prefix": f"{v}, prefix" for k, v in OURS.items()}
    for name, label in [*OURS.items(), *prefix.items(), *BASELINES.items()]:
        if name in results:
            median, fastest, n, rounds = results[name]
            lines.append(f"{label:26s}{n:8d}{rounds:8d}{median:10.1f}{fastest:10.1f}")
        else:
            lines.append(f"{label:26s}{'skipped or not run':>36s}")
    # min times are less hurt by other load on a shared machine: a second opinion.
    lines += ["", "throughput ratio = baseline ns / ours ns (higher is better); the baselines",
              "all take constant steps, as ours with ConstantSchedule (the floors apply to",
              "that column); NumPy and river are compared with ours on the same prefix rows",
              f"{'':18s}{'statistical':>12s}{'constant':>10s}{'constant':>10s}{'floor':>8s}",
              f"{'':18s}{'(median)':>12s}{'(median)':>10s}{'(min)':>10s}"]
    for base, label in BASELINES.items():
        cells = [f"{r:.2f}x" if r is not None else "n/a"
                 for r in (speedup(results, base, "ours_statistical"),
                           speedup(results, base, "ours_constant"),
                           speedup(results, base, "ours_constant", stat=1))]
        lines.append(f"ours vs {label:10s}{cells[0]:>12s}{cells[1]:>10s}{cells[2]:>10s}"
                     f"{'>= ' + format(FLOORS[base], 'g') + 'x':>8s}")
    return "\n".join(lines)


@pytest.fixture(scope="module", autouse=True)
def ratio_report(results, timed, publish_table):
    """After the module: the ratio table, in the terminal summary and (timed
    runs) in .benchmarks/quantile_ratios.txt."""
    yield
    tables = [float32_table(results, timed)]
    if any(name in results for name in OURS):
        tables.insert(0, ratio_table(results, timed))
    if any(tables):
        publish_table("\n\n".join(t for t in tables if t), "quantile_ratios.txt")


def test_throughput_floors(results, timed):
    """The issue's floors; asserted only with STREAMFIT_BENCH_FLOORS=1, as a
    shared machine makes timings noisy. Keep last: it reads the runs above."""
    if os.environ.get("STREAMFIT_BENCH_FLOORS") != "1":
        pytest.skip("throughput floors are asserted only with STREAMFIT_BENCH_FLOORS=1")
    if not timed:
        pytest.skip("STREAMFIT_BENCH_FLOORS=1 needs timed runs (drop --benchmark-disable)")
    # the floors compare the same update: ours with a constant stepsize
    missed = [f"{OURS['ours_constant']} vs {BASELINES[base]}: {r:.2f}x < {FLOORS[base]:g}x"
              for base in BASELINES
              if (r := speedup(results, base, "ours_constant")) is not None
              and r < FLOORS[base]]
    assert not missed, "throughput floors missed:\n" + "\n".join(missed)
