"""Shared benchmark fixtures: run size, single-threaded BLAS, C baselines.

``pytest benchmarks`` times everything; ``pytest benchmarks --benchmark-disable``
runs each benchmark once on smaller data, as a quick smoke test (CI).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

HERE = Path(__file__).resolve().parent
_REPORTS = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def timed(request):
    """False under --benchmark-disable: suites then shrink their data."""
    return not request.config.getoption("benchmark_disable")


@pytest.fixture(scope="module")
def sizes(request, timed):
    """A suite's sizes: its module's TIMED, or its SMOKE under
    --benchmark-disable (a suite whose sizes are not these two defines its
    own fixture of this name)."""
    return request.module.TIMED if timed else request.module.SMOKE


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
