"""Shared benchmark fixtures: run size, rounds, single-threaded BLAS, C
baselines, and what keeps a long run's results.

``pytest benchmarks`` times everything; ``pytest benchmarks --benchmark-disable``
runs each benchmark once on smaller data, as a quick smoke test (CI).

- ``--bench-rounds-scale F`` multiplies every benchmark's interleaved rounds
  by F (at least one round; smoke runs keep one): 2 for steadier medians on a
  busy machine, 0.5 for a quicker look.
- A benchmark that runs into the time limit (pytest-timeout's, 900 s unless
  ``--timeout`` says otherwise) fails alone: benchmarks use the signal method,
  which raises in the test, where the project's thread method ends the whole
  session. Each finished benchmark is also appended, as it finishes, to
  ``.benchmarks/incremental/<start time>.jsonl`` (its statistics and
  extra_info, one JSON object a line): a run that is killed keeps what it
  measured (``--benchmark-autosave`` writes only at the end).
"""
from __future__ import annotations

import ctypes
import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

HERE = Path(__file__).resolve().parent
_REPORTS = pytest.StashKey[list]()
_INCREMENTAL = pytest.StashKey[Path]()


def pytest_addoption(parser):
    parser.addoption("--bench-rounds-scale", type=float, default=1.0, metavar="F",
                     help="benchmarks: multiply every benchmark's interleaved rounds by F "
                          "(default 1)")


def pytest_configure(config):
    scale = config.getoption("bench_rounds_scale")
    if not (math.isfinite(scale) and scale > 0):
        raise pytest.UsageError(f"--bench-rounds-scale must be a number > 0, got {scale}")


def pytest_collection_modifyitems(config, items):
    # the signal method: a benchmark past its time limit fails alone (the
    # project's thread method ends the session and loses every result)
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(method="signal"))


@pytest.fixture(scope="session")
def bench_rounds(request, timed):
    """bench_rounds(r): a benchmark's r interleaved rounds scaled by
    --bench-rounds-scale (at least one; one in smoke runs)."""
    scale = request.config.getoption("bench_rounds_scale")

    def rounds(default):
        return max(1, round(default * scale)) if timed else 1
    return rounds


def _incremental_file(config):
    if _INCREMENTAL not in config.stash:
        folder = Path(config.rootpath) / ".benchmarks" / "incremental"
        folder.mkdir(parents=True, exist_ok=True)
        config.stash[_INCREMENTAL] = folder / (time.strftime("%Y%m%d-%H%M%S")
                                               + f"-{os.getpid()}.jsonl")
    return config.stash[_INCREMENTAL]


_OUTCOME = pytest.StashKey[str]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call":
        item.stash[_OUTCOME] = outcome.get_result().outcome


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    # after the test's fixtures are torn down: its benchmark has its stats
    bench = (getattr(item, "funcargs", None) or {}).get("benchmark")
    if bench is None or getattr(bench, "disabled", True):
        return
    stats = bench.stats.stats.as_dict() if bench.stats else None
    record = {"fullname": item.nodeid, "outcome": item.stash.get(_OUTCOME, "?"),
              "group": bench.group, "stats": stats,
              "extra_info": bench.extra_info, "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    with open(_incremental_file(item.config), "a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=str) + "\n")


@pytest.fixture(scope="session")
def timed(request):
    """False under --benchmark-disable: suites then shrink their data."""
    return not request.config.getoption("benchmark_disable")


@pytest.fixture(scope="module")
def sizes(request, timed, bench_rounds):
    """A suite's sizes: its module's TIMED (its "rounds" scaled by
    --bench-rounds-scale), or its SMOKE under --benchmark-disable (a suite
    whose sizes are not these two defines its own fixture of this name)."""
    if not timed:
        return request.module.SMOKE
    out = request.module.TIMED
    if isinstance(out, dict) and "rounds" in out:
        out = dict(out, rounds=bench_rounds(out["rounds"]))
    return out


@pytest.fixture(scope="session", autouse=True)
def single_thread_blas():
    # Every contender here is single-threaded per sample; pinning BLAS to one
    # thread keeps an idle BLAS pool from competing on a shared machine.
    # (BLAS only: the OpenMP threads of FPL's loop are what some suites time.)
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture(scope="session")
def compile_c(tmp_path_factory):
    """compile_c("name.c") -> ctypes.CDLL of benchmarks/name.c, built once a session
    with ``cc -O2 -shared -fPIC`` (no -march=native: the same code a wheel would
    ship). Skips when no C compiler is found."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    built = {}

    def build(source):
        if cc is None:
            pytest.skip("no C compiler (cc) found: C baseline skipped")
        if source not in built:
            src = HERE / source
            out = tmp_path_factory.mktemp("cbench") / (src.stem + ".so")
            proc = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(out), str(src)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                pytest.fail(f"compiling {src.name} failed:\n{proc.stderr}")
            built[source] = ctypes.CDLL(str(out))
        return built[source]

    return build


@pytest.fixture(scope="session")
def bench_report(request):
    """bench_report(text) shows text in the terminal summary, with or without -s."""
    return request.config.stash.setdefault(_REPORTS, []).append


def blas_line():
    """The BLAS libraries in use, their kernel and thread count (the numbers
    depend on them)."""
    libs = [f"{i['prefix']} {i['version']} {i.get('architecture') or ''} "
            f"({i['num_threads']} thread{'s' if i['num_threads'] != 1 else ''})"
            for i in threadpool_info() if i["user_api"] == "blas"]
    return "BLAS: " + "; ".join(libs)


@pytest.fixture(scope="session")
def publish_table(request, bench_report, timed):
    """publish_table(text, filename): show a suite's ratio table, headed by the
    BLAS in use, in the terminal summary and, on timed runs, write it to
    .benchmarks/<filename> (a smoke run does not overwrite the last measured
    table)."""
    def publish(text, filename):
        text = blas_line() + "\n\n" + text
        if timed:
            out = Path(request.config.rootpath) / ".benchmarks" / filename
            out.parent.mkdir(exist_ok=True)
            out.write_text(text + "\n")
        bench_report(text)
    return publish


def pytest_terminal_summary(terminalreporter, config):
    for text in config.stash.get(_REPORTS, []):
        terminalreporter.write_sep("-", "benchmark ratios")
        terminalreporter.write_line(text)
