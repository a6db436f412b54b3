"""benchmarks/gate.py, the performance gate: its verdicts on given measurements,
its reading of callgrind's dump files, the workload registry, the injection
hook and a dry run of the workloads (no Valgrind here: the counts themselves
are checked by the gate's own runs, see docs/benchmarks_gate.rst);
benchmarks/_busy.py's busy-loop child ending with its parent."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:
    import fcntl   # compare-commits' cache lock (POSIX only)
except ImportError:
    fcntl = None

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"

pytestmark = pytest.mark.skipif(not (BENCHMARKS / "gate.py").exists(),
                                reason="benchmarks/ not beside the tests")


def load_by_path(name, path):
    # pytest's importlib mode puts no benchmarks/ folder on sys.path
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@pytest.fixture
def gate(monkeypatch):
    # gate.py imports gate_workloads and gate_inject by name, as a script does
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return load_by_path("streamfit_gate", BENCHMARKS / "gate.py")


@pytest.fixture
def inject(monkeypatch):
    module = load_by_path("streamfit_gate_inject", BENCHMARKS / "gate_inject.py")
    return module


ENV = {"python": "3.11.7", "implementation": "cpython", "machine": "x86_64", "numpy": "2.4",
       "scipy": "1.17", "scikit-learn": "1.9", "valgrind": "valgrind-3.19.0",
       "openblas_coretype": "Haswell"}


def document(per_unit, env=None, **extra):
    """A gate measurement: per_unit {name: instructions per unit}; extra
    {name: entry fields} for baselines and absent workloads."""
    results = {}
    for name, value in per_unit.items():
        results[name] = {"unit": "row", "sizes": [10, 20], "gated": True, "against": None,
                         "band": 0.005, "doc": "", "per_unit": float(value), "fixed": 0.0,
                         "counts": [0, 0]}
    for name, fields in extra.items():
        results[name] = {"unit": "row", "sizes": [10, 20], "gated": True, "against": None,
                         "band": 0.005, "doc": "", **fields}
    return {"format": 1, "measure": "test", "environment": dict(ENV, **(env or {})),
            "results": results, "seconds": 1.0, "created": "now"}


def verdicts(gate, saved, new, threshold=0.10):
    rows, _ = gate.compare(saved, new, threshold)
    return {row[0]: (round(row[4], 6), row[6]) for row in rows}


def test_identical_counts_pass(gate):
    base = document({"rows": 300.0, "trial": 2.5e6})
    text, failed = gate.report(base, base)
    assert not failed
    assert "gate: PASS" in text and "+0.00%" in text


def test_a_rise_of_the_threshold_fails_naming_the_benchmark_its_change_and_band(gate):
    base = document({"rows": 300.0, "trial": 2.5e6})
    new = document({"rows": 330.0, "trial": 2.5e6})
    text, failed = gate.report(base, new)
    assert failed
    assert verdicts(gate, base, new) == {"rows": (0.1, "REGRESSED"), "trial": (0.0, "ok")}
    assert "gate: FAIL: 1 benchmark regressed by 10% or more" in text
    assert "rows: +10.00% instructions per row (noise band ±0.5%)" in text


def test_within_its_band_of_the_threshold_counts_as_reaching_it(gate):
    base = document({"a": 1000.0, "b": 1000.0, "c": 1000.0, "d": 1000.0, "e": 1000.0})
    new = document({"a": 1096.0, "b": 1094.0, "c": 1030.0, "d": 1004.0, "e": 800.0})
    assert verdicts(gate, base, new) == {
        "a": (0.096, "REGRESSED"),      # >= 10% - 0.5%
        "b": (0.094, "slower"),          # beyond the band, below threshold - band
        "c": (0.03, "slower"),
        "d": (0.004, "ok"),              # within the band
        "e": (-0.2, "faster")}
    assert gate.report(base, new)[1]
    # the wider of the two runs' bands applies
    new["results"]["b"]["band"] = 0.02
    assert verdicts(gate, base, new)["b"] == (0.094, "REGRESSED")
    # and the threshold is a parameter
    assert verdicts(gate, base, new, threshold=0.25)["a"] == (0.096, "slower")


def test_baselines_are_reported_as_ratios_never_gated(gate):
    base = document({"rows": 300.0}, numpy={"gated": False, "against": "rows",
                                           "per_unit": 18000.0, "fixed": 0.0})
    new = document({"rows": 300.0}, numpy={"gated": False, "against": "rows",
                                          "per_unit": 36000.0, "fixed": 0.0})
    text, failed = gate.report(base, new)
    assert not failed
    assert "numpy / rows" in text and "60.00x" in text and "120.00x" in text
    assert "numpy" not in verdicts(gate, base, new)


def test_absent_and_one_sided_benchmarks_are_listed_not_compared(gate):
    base = document({"rows": 300.0, "gone": 5.0}, learn_one={"absent": True})
    new = document({"rows": 300.0, "added": 7.0}, learn_one={"absent": True})
    text, failed = gate.report(base, new)
    assert not failed
    assert set(verdicts(gate, base, new)) == {"rows"}
    assert "gone: measured in the baseline run only" in text
    assert "added: measured in the new run only" in text
    assert "learn_one: absent from both builds" in text


def test_a_different_environment_is_warned_about(gate):
    text, _ = gate.report(document({"rows": 300.0}),
                          document({"rows": 300.0}, env={"numpy": "2.5"}))
    assert "WARNING: the environments differ" in text and "numpy: 2.4 -> 2.5" in text


def test_check_and_record_exit_statuses(gate, tmp_path, monkeypatch, capsys):
    measured = [document({"rows": 300.0})]
    monkeypatch.setattr(gate, "measure", lambda *args, **kwargs: measured[0])
    assert gate.main(["record", str(tmp_path / "base")]) == 0
    saved = json.loads((tmp_path / "base" / "gate.json").read_text())
    assert saved["results"]["rows"]["per_unit"] == 300.0
    assert gate.main(["check", str(tmp_path / "base")]) == 0
    measured[0] = document({"rows": 340.0})
    assert gate.main(["check", str(tmp_path / "base"), "--save", str(tmp_path / "new")]) == 1
    assert "rows: +13.33%" in capsys.readouterr().out
    assert (tmp_path / "new" / "gate.json").exists()
    assert gate.main(["check", str(tmp_path / "base"), "--threshold", "0.2"]) == 0
    # no baseline, or one of another format: an error, not a verdict
    assert gate.main(["check", str(tmp_path / "nowhere")]) == 2
    assert "gate.py record" in capsys.readouterr().err
    saved["format"] = 0
    (tmp_path / "base" / "gate.json").write_text(json.dumps(saved))
    assert gate.main(["check", str(tmp_path / "base")]) == 2


def test_a_workload_that_fails_is_an_error_in_the_new_build_only(gate, tmp_path, monkeypatch,
                                                                capsys):
    broken = {"failed": "n = 10: ValueError: boom", "traceback": "Traceback...\nValueError: boom"}
    measured = [document({"rows": 300.0}, task=broken)]
    monkeypatch.setattr(gate, "measure", lambda *args, **kwargs: measured[0])
    gate.save(document({"rows": 300.0, "task": 2e6}), tmp_path / "base")
    assert gate.main(["check", str(tmp_path / "base")]) == 2
    captured = capsys.readouterr()
    assert "task: measured in the baseline run only (new failed: n = 10: ValueError: boom)" \
        in captured.out
    assert "1 workload(s) failed: task" in captured.err
    # failing in the baseline's build (an API it lacks) is no comparison, no error
    gate.save(document({"rows": 300.0}, task=broken), tmp_path / "base")
    measured[0] = document({"rows": 300.0, "task": 2e6})
    assert gate.main(["check", str(tmp_path / "base")]) == 0
    assert "task: measured in the new run only (baseline failed" in capsys.readouterr().out


@pytest.mark.skipif(fcntl is None, reason="compare-commits locks its build cache with fcntl "
                    "(POSIX, as valgrind is)")
def test_compare_commits_refuses_an_unknown_revision(gate, capsys):
    assert gate.main(["compare-commits", "no-such-revision-xyz", "installed"]) == 2
    assert "no-such-revision-xyz" in capsys.readouterr().err


def test_callgrind_dumps_are_read_by_their_label(gate, tmp_path):
    def dump(path, trigger, summary):
        path.write_text(f"# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\n"
                        f"pid: 7\ncmd:  python x\npart: 1\n\ndesc: I1 cache: \n"
                        f"desc: Trigger: {trigger}\n\npositions: line\nevents: Ir\n"
                        f"summary: {summary}\n\n\nfn=(1) main\n0 12\n")
    dump(tmp_path / "cg.101.1", "Client Request: rows|4000", 1927618)
    dump(tmp_path / "cg.102.1", "Client Request: rows|20000", 6617925)
    dump(tmp_path / "cg.101", "Program termination", 18446744073702931993)
    assert gate.parse_dumps(tmp_path) == {"rows|4000": 1927618, "rows|20000": 6617925}


def test_the_registry(gate):
    import gate_workloads as w
    inject = load_by_path("streamfit_gate_inject_r", BENCHMARKS / "gate_inject.py")
    prefixes = [p for _, targets in inject.INJECTIONS.values() for p in targets]
    assert len(w.WORKLOADS) >= 11
    for name, entry in w.WORKLOADS.items():
        n1, n2 = entry.sizes
        assert 0 < n1 < n2 and entry.doc and entry.unit, name
        assert 0 < entry.band < 0.10 / 3, name
        if entry.gated:
            # the compiled state object called directly: no hook in Python
            # reaches it, and the detection runs check it as the control that
            # must pass (docs/benchmarks_gate.rst)
            assert name.startswith((*prefixes, "kernel-")), f"{name}: no injection meant for it"
            # whole tenths, so that an injection adds exactly a tenth of the units
            assert n1 % 10 == 0 and n2 % 10 == 0, name
        else:
            assert w.WORKLOADS[entry.against].gated, name
    for family in ("quantile-rows-d10", "quantile-rows-d100", "fpl-trial",
                   "one-row-partial-fit", "wrapper-partial-fit", "dask-task"):
        assert family in w.WORKLOADS
    with pytest.raises(ValueError, match="registered twice"):
        w.workload("fpl-trial", "trial", (10, 20))(lambda n: None)
    with pytest.raises(ValueError, match="sizes"):
        w.workload("new", "row", (20, 10))(lambda n: None)


def test_the_hook_adds_whole_tenths_and_says_when_it_never_fired(inject):
    class Path_:
        def __init__(self):
            self.calls = []

        def work(self, units):
            self.calls.append(units)

    inject._fired.clear()
    make = inject._units_again("demo", lambda args: args[0])
    Path_.work = make(Path_.work)
    obj = Path_()
    for units in (5, 5, 5, 5, 5, 25):
        obj.work(units)
    # owed after each call: 0, 1, 0, 1, 0, 3 (a tenth of 5, 10, ..., 50 units,
    # whole): the call that makes a unit owed is repeated that many times,
    # and the repeats are not counted as seen
    assert obj.calls == [5, 5, 5, 5, 5, 5, 5, 25, 25, 25, 25]
    assert inject._fired == {"demo": 5} and 50 // 10 == 5
    inject._active[:] = ["rows"]
    inject._fired.clear()
    with pytest.raises(RuntimeError, match="injection rows never fired in quantile-rows-d10"):
        inject.check_fired("quantile-rows-d10")
    inject.check_fired("fpl-trial")             # not meant for it
    with pytest.raises(ValueError, match="NAME\\[:PERCENT\\]"):
        inject.apply("no-such-path")


def test_the_block_hook_spreads_a_tenth_more_rows_through_the_block(inject):
    import numpy as np

    class Learner:
        def fit(self, X, y=None):
            self.seen = (X.copy(), None if y is None else y.copy())
            return self

    inject._fired.clear()
    inject._spread(Learner, "fit", "rows")
    X, y = np.arange(40.0).reshape(20, 2), np.arange(20.0)
    X_seen, y_seen = Learner().fit(X, y).seen
    # every row once, in order, and rows 5 and 15 (the middles of the
    # block's halves) twice
    assert y_seen.tolist() == sorted([*range(20), 5, 15])
    assert (X_seen == X[y_seen.astype(int)]).all()
    assert inject._fired == {"rows": 2}
    assert Learner().fit(X[:30]).seen[1] is None and len(Learner().fit(X).seen[0]) == 22
    # at 0%: the same copy of the block, no extra row, never "fired"

    class Idle(Learner):
        pass

    Idle.fit = Learner.fit.__wrapped__
    inject._percent[0] = 0
    try:
        inject._spread(Idle, "fit", "idle")
    finally:
        inject._percent[0] = 10
    assert Idle().fit(X, y).seen[1].tolist() == list(range(20))
    assert "idle" not in inject._fired


def dry_run(*args, inject=None):
    env = {k: v for k, v in os.environ.items() if k != "STREAMFIT_GATE_INJECT"}
    if inject:
        env["STREAMFIT_GATE_INJECT"] = inject
    return subprocess.run([sys.executable, str(BENCHMARKS / "gate.py"), "dry-run", *args],
                          capture_output=True, text=True, env=env, timeout=600)


def test_a_dry_run_runs_workloads_and_the_injections_fire():
    # without Valgrind: every measured run once, each in its forked child
    proc = dry_run("--only", "quantile-rows-d10", "one-row-partial-fit", "wrapper-predict",
                   "--jobs", "1", inject="one-row")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "quantile-rows-d10" in proc.stdout and "nothing was counted" in proc.stdout
    proc = dry_run("--only", "quantile-rows-d10", inject="rows:0")      # the hook, no extra
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = dry_run("--only", "quantile-rows-d10", inject="nonsense")
    assert proc.returncode == 2 and "NAME[:PERCENT]" in proc.stderr


def _gone(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" in f.read()         # a zombie no one reaps: dead
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(signal, "SIGKILL"),
                    reason="reads /proc, kills with SIGKILL")
def test_the_busy_loop_child_dies_with_its_parent():
    script = (f"import sys, time; sys.path.insert(0, {str(BENCHMARKS)!r})\n"
              "from _busy import busy_core\n"
              "with busy_core() as child:\n"
              "    print(child.pid, flush=True)\n"
              "    with busy_core() as other:\n"
              "        print(other.pid, flush=True)\n"
              "    time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        first = int(parent.stdout.readline())
        second = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while not _gone(second) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(second), "the block's exit left its child running"
        assert not _gone(first)
        parent.send_signal(signal.SIGKILL)      # no exit handler, no finally: the kernel's
        parent.wait(timeout=30)
        deadline = time.monotonic() + 10
        while not _gone(first) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(first), "the busy-loop child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()


def test_ratio_kinds_match_the_docs_renderer():
    timing = load_by_path("streamfit_bench_timing", BENCHMARKS / "_timing.py")
    tables = load_by_path("streamfit_bench_tables", ROOT / "docs" / "_ext" / "bench_tables.py")
    assert timing.RATIO_KINDS == tables.BETTER
