"""Issue 40, case 6: the main job and an earlier report.

- An interrupted run (Ctrl-C while a figure or report.md is written, or at any
  moment of a run) leaves the earlier report whole: every file is written to
  a temporary file and renamed; report.md is the old one or the new one, every
  figure it links is a whole PNG, and no temporary file is left behind.
- ``--only NAME`` into the folder of a report updates that section and keeps
  the others (the report never shrinks), or refuses before any work, saying
  how, when it cannot (another preset, a report it cannot read).
- An unwritable ``--out`` fails before any work, naming the folder.

Real signals at random moments run in child processes (a run may be stopped
anywhere, including inside the Dask-free sequential runner's tasks).
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from streamfit.__main__ import main
from streamfit.experiments import get_experiment, write_report
from streamfit.experiments import report as report_module

#: cheap settings of three experiments (quick preset, small overrides)
CHEAP = {"pca-goe": {"sizes": (10, 20), "reps": 4, "ks": (1, 2)},
         "qr-fig2": {"n": 2000, "d": 5, "reps": 6, "n_points": 8, "t_short": 200},
         "qr-thm7": {"n": 3000, "d": 5, "batch_sizes": (50,), "reps": 6, "n_points": 8}}


def _write(out, names=tuple(CHEAP), preset="quick"):
    return write_report([get_experiment(n) for n in names], preset=preset, out=str(out),
                        progress=False, overrides={n: CHEAP[n] for n in names})


def _files(out):
    """{relative path: bytes} of the report folder."""
    got = {}
    for root, _, files in os.walk(out):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as fh:
                got[os.path.relpath(path, out)] = fh.read()
    return got


def _whole(out):
    """The folder holds a readable report: report.md, its summary, every
    linked figure a whole PNG, no temporary file."""
    files = _files(out)
    assert not [f for f in files if f.endswith(".tmp")], sorted(files)
    md = files["report.md"].decode("utf-8")
    json.loads(files["report-summary.json"])
    for rel in re.findall(r"\]\((figures/[^)]+\.png)\)", md):
        data = files[rel]
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data.rstrip().endswith(b"IEND\xaeB`\x82"), rel
    return md


# -- an interrupted run keeps the earlier report ------------------------------------------

def test_ctrl_c_while_a_figure_is_written_keeps_the_earlier_figure_and_report(
        tmp_path, monkeypatch):
    _write(tmp_path)
    before = _files(tmp_path)
    from matplotlib.figure import Figure

    real = Figure.savefig

    def half_then_interrupt(self, fh, **kw):
        real(self, fh, **kw)
        fh.truncate(124)          # the 124-byte PNG of the issue, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        _write(tmp_path)
    assert _files(tmp_path) == before
    _whole(tmp_path)


def test_ctrl_c_while_report_md_is_written_keeps_the_earlier_report(tmp_path, monkeypatch):
    _write(tmp_path)
    before = _files(tmp_path)["report.md"]
    real = report_module._header

    def interrupted(*args, **kw):
        real(*args, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(report_module, "_header", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _write(tmp_path)
    assert _files(tmp_path)["report.md"] == before
    _whole(tmp_path)


_CHILD = r"""
import sys
from streamfit.experiments import get_experiment, write_report
CHEAP = {cheap!r}
write_report([get_experiment(n) for n in CHEAP], preset="quick", out=sys.argv[1],
             progress=False, overrides=CHEAP)
print("finished", flush=True)
"""


@pytest.mark.parametrize("delay", [0.4, 1.5, 3.0, 5.0])
def test_a_real_sigint_at_any_moment_leaves_a_whole_report(tmp_path, delay):
    """A child writes the report over an earlier one and gets SIGINT after
    ``delay`` seconds (in its imports, its tasks, its figures or its files):
    the folder then holds the earlier report or the new one, whole."""
    _write(tmp_path)
    old = _files(tmp_path)["report.md"]
    script = tmp_path.parent / f"child_{delay}.py"
    script.write_text(_CHILD.format(cheap=CHEAP))
    child = subprocess.Popen([sys.executable, str(script), str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    child.send_signal(signal.SIGINT)
    try:
        out, err = child.communicate(timeout=120)
    except subprocess.TimeoutExpired:       # pragma: no cover - a hang fails the test
        child.kill()
        raise AssertionError(f"the child did not stop within 120 s of SIGINT at {delay} s")
    assert child.returncode in (0, 1, -signal.SIGINT), (child.returncode, err[-2000:])
    if child.returncode == 1:
        # (-SIGINT: the signal landed where Python's default action ran, e.g.
        # in interpreter shutdown: no traceback to read)
        assert "KeyboardInterrupt" in err, err[-2000:]
    md = _whole(tmp_path)
    # the earlier report, or (the run got far enough) the new one: never a mix
    assert md.encode() == old or ("finished" in out or child.returncode != 0)
    assert set(_sections(md)) == set(CHEAP)


def test_report_files_get_the_permissions_of_an_ordinary_write(tmp_path):
    """Written through temporary files (0600 as made), yet readable as any
    file the user writes: the umask decides, as for open()."""
    _write(tmp_path, names=("pca-goe",))
    expected = 0o666 & ~report_module._UMASK
    for rel in _files(tmp_path):
        assert os.stat(tmp_path / rel).st_mode & 0o777 == expected, rel


# -- --only updates an existing report, never shrinks it -----------------------------------

def _sections(md):
    """{experiment: its section's markdown} of a report."""
    marks = list(re.finditer(r'^<a id="([^"]+)"></a>$', md, flags=re.M))
    ends = [m.start() for m in marks[1:]] + [len(md)]
    return {m.group(1): md[m.start():end] for m, end in zip(marks, ends)}


def test_only_updates_its_section_and_keeps_the_others(tmp_path):
    _write(tmp_path)
    md0 = _whole(tmp_path)
    s0 = _sections(md0)
    summary0 = json.loads((tmp_path / "report-summary.json").read_text())
    time.sleep(1.1)                  # a different stamp for the re-run section
    _write(tmp_path, names=("qr-fig2",))
    md1 = _whole(tmp_path)
    s1 = _sections(md1)
    assert set(s1) == set(s0) == set(CHEAP)
    for name in ("pca-goe", "qr-thm7"):
        assert s1[name] == s0[name], name          # kept byte for byte
    summary1 = json.loads((tmp_path / "report-summary.json").read_text())
    assert set(summary1["experiments"]) == set(CHEAP)
    assert summary1["counts"] == summary0["counts"]
    assert len(summary1["runs"]) == 2 and summary1["runs"][-1]["experiments"] == ["qr-fig2"]
    assert len(md1) >= 0.9 * len(md0)
    # the header lists every experiment, and says which runs made the report
    for name in CHEAP:
        assert f"[`{name}`](#{name})" in md1
    assert "sections of earlier runs kept" in md1


def test_only_into_a_report_of_another_preset_is_refused_before_any_work(tmp_path, capsys,
                                                                         monkeypatch):
    _write(tmp_path)
    before = _files(tmp_path)
    import streamfit.experiments as experiments

    def no_runner(**kw):              # pragma: no cover - reaching it fails the test
        raise AssertionError("the run started")

    monkeypatch.setattr(experiments, "open_runner", no_runner)
    with pytest.raises(SystemExit) as exc:
        main(["--only", "pca-goe", "--full", "--out", str(tmp_path), "--workers", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "'quick' preset" in err and "--quick" in err and "--out" in err
    assert _files(tmp_path) == before


def test_only_into_an_unreadable_report_is_refused_saying_how(tmp_path, capsys, monkeypatch):
    _write(tmp_path)
    (tmp_path / "report-summary.json").write_text("{not json")
    before = _files(tmp_path)
    import streamfit.experiments as experiments

    monkeypatch.setattr(experiments, "open_runner", lambda **kw: (_ for _ in ()).throw(
        AssertionError("the run started")))
    with pytest.raises(SystemExit) as exc:
        main(["--only", "pca-goe", "--out", str(tmp_path), "--workers", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "cannot be read" in err and "--out OTHER_DIR" in err
    assert _files(tmp_path) == before


def test_a_full_run_replaces_a_report_it_covers(tmp_path):
    _write(tmp_path, names=("pca-goe",))
    _write(tmp_path)                                 # a superset: nothing to keep
    md = _whole(tmp_path)
    assert md.count('<a id="') == len(CHEAP)


# -- an unwritable --out fails first ---------------------------------------------------

def test_an_unwritable_out_fails_before_any_work(tmp_path, capsys, monkeypatch):
    import streamfit.experiments as experiments

    monkeypatch.setattr(experiments, "open_runner", lambda **kw: (_ for _ in ()).throw(
        AssertionError("the run started")))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    start = time.perf_counter()
    with pytest.raises(SystemExit) as exc:
        main(["--only", "pca-goe", "--out", str(blocker / "report"), "--workers", "0"])
    assert exc.value.code == 2 and time.perf_counter() - start < 30
    err = capsys.readouterr().err
    assert "not writable" in err and str(blocker / "report") in err


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into read-only folders")
def test_a_read_only_out_fails_before_any_work(tmp_path, capsys, monkeypatch):
    import streamfit.experiments as experiments

    monkeypatch.setattr(experiments, "open_runner", lambda **kw: (_ for _ in ()).throw(
        AssertionError("the run started")))
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    try:
        with pytest.raises(SystemExit) as exc:
            main(["--only", "pca-goe", "--out", str(out), "--workers", "0"])
    finally:
        out.chmod(0o755)
    assert exc.value.code == 2
    assert "not writable" in capsys.readouterr().err


def test_write_report_refuses_an_unwritable_folder_before_any_task(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    calls = []

    class Runner:
        description = "counting"

        def submit(self, tasks):        # pragma: no cover - reaching it fails the test
            calls.append(tasks)
            return []

    with pytest.raises(PermissionError, match="not writable"):
        write_report([get_experiment("pca-goe")], out=str(blocker / "r"), runner=Runner(),
                     progress=False)
    assert not calls
