"""benchmarks/compare.py: the ratios of two saved pytest-benchmark runs, compared
with a margin, each in its better direction."""
import doctest
import importlib.util
import json
import math
import subprocess
import sys
import types
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCHMARKS / "compare.py"

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="benchmarks/ not beside the tests")


def load_by_path(name, path):
    # pytest's importlib mode puts no benchmarks/ folder on sys.path
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@pytest.fixture(scope="module")
def compare():
    return load_by_path("streamfit_bench_compare", SCRIPT)


def run_json(*benches):
    """A pytest-benchmark JSON document: (fullname, extra_info) pairs."""
    return {"machine_info": {}, "commit_info": {}, "version": "5.1.0",
            "benchmarks": [{"group": None, "name": full.split("::")[-1], "fullname": full,
                            "params": None, "stats": {"median": 1.0}, "extra_info": extra}
                           for full, extra in benches]}


def write(path, doc):
    path.write_text(json.dumps(doc))
    return str(path)


SAVED = run_json(
    ("b/test_q.py::test_numpy", {"rows": 5000, "median_ns_per_sample": 3000.0,
                                 "ratio_speedup_constant_vs_numpy": 50.0,
                                 "ratio_speedup_statistical_vs_numpy": 45.0}),
    ("b/test_q.py::test_lowrank", {"ratio_time_dense_over_vector": 40.0}),
    ("b/test_q.py::test_gone", {"ratio_time_a_over_b": 2.0}))


def new_run(speedup=50.0, time=40.0, extra=()):
    return run_json(
        ("b/test_q.py::test_numpy", {"rows": 5000, "median_ns_per_sample": 9000.0,
                                     "ratio_speedup_constant_vs_numpy": speedup,
                                     "ratio_speedup_statistical_vs_numpy": 45.0}),
        ("b/test_q.py::test_lowrank", {"ratio_time_dense_over_vector": time}),
        *extra)


def verdicts(report):
    return {(row.benchmark.split("::")[-1], row.ratio): row.verdict for row in report.rows}


def test_within_the_margin_passes_and_absolute_times_are_ignored(compare, tmp_path, capsys):
    # the new run's absolute time per sample tripled (another machine): ignored
    code = compare.main([write(tmp_path / "a.json", SAVED),
                         write(tmp_path / "b.json", new_run(speedup=41.0, time=48.0)),
                         "--margin", "0.25"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ratio_speedup_constant_vs_numpy" in out and "-18.0%" in out
    assert "median_ns_per_sample" not in out
    assert "0 of 3 ratios worse by more than 25%" in out


@pytest.mark.parametrize("speedup, time, worse", [
    (39.0, 40.0, ("test_numpy", "ratio_speedup_constant_vs_numpy")),     # 50 -> 39: 1.28x
    (50.0, 51.0, ("test_lowrank", "ratio_time_dense_over_vector")),      # 40 -> 51: 1.275x
])
def test_a_ratio_worse_by_more_than_the_margin_fails(compare, tmp_path, capsys,
                                                     speedup, time, worse):
    code = compare.main([write(tmp_path / "a.json", SAVED),
                         write(tmp_path / "b.json", new_run(speedup, time))])
    out = capsys.readouterr().out
    assert code == 1, out
    line = next(ln for ln in out.splitlines() if worse[1] in ln)
    assert line.rstrip().endswith("WORSE"), line
    assert "1 of 3 ratios worse" in out
    # a wider margin lets the same change through
    assert compare.main([str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                         "--margin", "0.3"]) == 0


def test_the_better_direction_follows_the_kind(compare):
    # a speed-up that rose and a time ratio that fell are improvements, not failures
    report = compare.compare(SAVED, new_run(speedup=80.0, time=20.0), margin=0.25)
    assert not report.failed
    assert verdicts(report) == {
        ("test_numpy", "ratio_speedup_constant_vs_numpy"): "better",
        ("test_numpy", "ratio_speedup_statistical_vs_numpy"): "ok",
        ("test_lowrank", "ratio_time_dense_over_vector"): "better"}
    # and the other way round, the same sizes of change fail
    report = compare.compare(new_run(speedup=80.0, time=20.0), SAVED, margin=0.25)
    assert report.failed
    assert {(r.ratio, r.verdict) for r in report.worse} == {
        ("ratio_speedup_constant_vs_numpy", "WORSE"), ("ratio_time_dense_over_vector", "WORSE")}
    # a speed-up and its inverse, a time ratio, fail together
    for kind, value in (("speedup", 1 / 1.3), ("time", 1.3)):
        a = run_json(("x::t", {f"ratio_{kind}_r": 1.0}))
        b = run_json(("x::t", {f"ratio_{kind}_r": value}))
        assert compare.compare(a, b, margin=0.25).failed
        assert not compare.compare(a, b, margin=0.35).failed
    for kind in ("error", "memory"):
        assert compare.direction(f"ratio_{kind}_x_over_y") == "lower"
    assert compare.direction("ratio_speedup_x_vs_y") == "higher"


def test_missing_benchmarks_and_ratios_are_listed_not_failures(compare, tmp_path, capsys):
    new = new_run(extra=[("b/test_q.py::test_added", {"ratio_time_c_over_d": 9.0})])
    del new["benchmarks"][0]["extra_info"]["ratio_speedup_statistical_vs_numpy"]
    new["benchmarks"][1]["extra_info"]["ratio_time_rank1_over_vector"] = 3.0
    report = compare.compare(SAVED, new)
    assert not report.failed
    assert report.only_saved == ["b/test_q.py::test_gone"]
    assert report.only_new == ["b/test_q.py::test_added"]
    assert report.ratio_only_saved == [("b/test_q.py::test_numpy",
                                        "ratio_speedup_statistical_vs_numpy")]
    assert report.ratio_only_new == [("b/test_q.py::test_lowrank",
                                      "ratio_time_rank1_over_vector")]
    code = compare.main([write(tmp_path / "a.json", SAVED), write(tmp_path / "b.json", new)])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    for title, item in (("benchmarks only in SAVED", "b/test_q.py::test_gone"),
                        ("benchmarks only in NEW", "b/test_q.py::test_added"),
                        ("ratios only in SAVED", "ratio_speedup_statistical_vs_numpy"),
                        ("ratios only in NEW", "ratio_time_rank1_over_vector")):
        at = next(i for i, ln in enumerate(lines) if ln.startswith(title))
        assert item in lines[at + 1], (title, lines[at:at + 2])


def test_unknown_kinds_are_shown_not_judged(compare):
    a = run_json(("x::t", {"ratio_throughput_x": 10.0, "ratio_time_y": 1.0}))
    b = run_json(("x::t", {"ratio_throughput_x": 1.0, "ratio_time_y": 1.0}))
    report = compare.compare(a, b)
    assert not report.failed
    assert verdicts(report) == {("t", "ratio_throughput_x"): "?", ("t", "ratio_time_y"): "ok"}
    assert "1 not judged (unknown kind" in compare.format_report(report)


def test_bad_input_exits_2_with_a_message(compare, tmp_path, capsys):
    good = write(tmp_path / "a.json", SAVED)
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"rows": []}))
    for argv, says in (([good, str(tmp_path / "none.json")], "not a run number"),
                       ([good, str(tmp_path / "broken.json")], "broken.json"),
                       ([good, str(tmp_path / "other.json")], "not a pytest-benchmark JSON"),
                       ([good, good, "--margin", "-0.1"], "--margin"),
                       ([good, good, "--margin", "nan"], "--margin"),
                       ([good, "7", "--storage", str(tmp_path)], "run 0007")):
        with pytest.raises(SystemExit) as exc:
            compare.main(argv)
        assert exc.value.code == 2, argv
        assert says in capsys.readouterr().err, argv
    with pytest.raises(ValueError, match="margin"):
        compare.compare(SAVED, SAVED, margin=-1)


def test_run_numbers_and_latest_in_the_storage_as_a_script(compare, tmp_path):
    # pytest-benchmark's layout: STORAGE/<machine id>/NNNN_<commit>_<date>.json
    folder = tmp_path / "store" / compare.machine_id()
    folder.mkdir(parents=True)
    write(folder / "0001_abc_20260101_000000.json", SAVED)
    write(folder / "0002_abc_20260101_000100_uncommitted-changes.json", new_run(speedup=45.0))
    write(folder / "0003_abc_20260101_000200.json", new_run(speedup=30.0))

    def script(*args):
        return subprocess.run([sys.executable, str(SCRIPT), *args,
                               "--storage", str(tmp_path / "store")],
                              capture_output=True, text=True, cwd=tmp_path, timeout=60)

    ok = script("0001", "2")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "0001_abc" in ok.stdout and "0002_abc" in ok.stdout
    bad = script("1", "latest")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "0003_abc" in bad.stdout and "WORSE" in bad.stdout


def test_a_real_pytest_benchmark_autosave(compare, tmp_path):
    """Two runs saved by pytest-benchmark itself (--benchmark-autosave), then
    compared by number: the script reads what pytest-benchmark writes."""
    (tmp_path / "test_tiny.py").write_text(
        "import os\n"
        "def test_tiny(benchmark):\n"
        "    benchmark.pedantic(sum, args=(range(10),), rounds=2, iterations=1)\n"
        "    benchmark.extra_info['ratio_speedup_tiny_vs_sum'] = "
        "float(os.environ['TINY_RATIO'])\n")
    store = tmp_path / "store"
    for ratio in ("10", "5"):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "test_tiny.py", "-q", "-p", "no:cacheprovider",
             "--rootdir", str(tmp_path), "--benchmark-autosave",
             f"--benchmark-storage=file://{store}"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120,
            env={**__import__("os").environ, "TINY_RATIO": ratio})
        assert proc.returncode == 0, proc.stdout + proc.stderr
    saved = sorted(store.glob("*/0*.json"))
    assert [p.name[:4] for p in saved] == ["0001", "0002"], saved
    proc = subprocess.run([sys.executable, str(SCRIPT), "0001", "latest",
                           "--storage", str(store)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "test_tiny.py::test_tiny" in proc.stdout
    assert "-50.0%" in proc.stdout and "WORSE" in proc.stdout


def test_the_kinds_agree_with_record_ratios(compare):
    timing = load_by_path("streamfit_bench_timing", BENCHMARKS / "_timing.py")
    assert timing.RATIO_KINDS == compare.DIRECTIONS
    bench = types.SimpleNamespace(extra_info={})
    timing.record_ratios(bench, {"ratio_speedup_a_vs_b": 2, "ratio_time_c_over_d": None})
    assert bench.extra_info == {"ratio_speedup_a_vs_b": 2.0}      # None: baseline skipped
    for bad in ({"speedup_a_vs_b": 2.0}, {"ratio_fast_a": 2.0}, {"ratio_time_": 2.0},
                {"ratio_time_a": math.inf}, {"ratio_time_a": 0.0}, {"ratio_time_a": math.nan}):
        with pytest.raises(ValueError):
            timing.record_ratios(bench, bad)
    assert bench.extra_info == {"ratio_speedup_a_vs_b": 2.0}


def test_docstring_example_runs(compare):
    result = doctest.testmod(compare, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
