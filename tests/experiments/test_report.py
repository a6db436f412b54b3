"""The main job writes the report folder: report.md with every experiment's
section and verdict, and the PNG figures it links."""
import json
import os
import re

import pytest

from streamfit.__main__ import main
from streamfit.experiments import EXPERIMENTS, get_experiment, write_report
from streamfit.experiments._types import BEYOND, PAPER, STATUSES, Check, Outcome, judge
from streamfit.experiments.report import SUMMARY_FILE, verdict_line


def _png_ok(path):
    from matplotlib import image

    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n", path
    img = image.imread(path)
    assert img.shape[0] >= 300 and img.shape[1] >= 400, (path, img.shape)
    # not a blank canvas: a drawn figure has many distinct pixel values
    assert len(set(map(tuple, img.reshape(-1, img.shape[-1])[::97].tolist()))) > 20


def _linked_figures(md):
    return re.findall(r"!\[[^\]]*\]\((figures/[^)]+\.png)\)", md)


def test_command_writes_report_on_a_local_cluster(tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["--only", "pca-goe", "--only", "qr-fig4", "--reps", "1", "--workers", "2",
                 "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Dask LocalCluster, 2 worker process(es)" in printed
    verdicts = [line for line in printed.splitlines() if line.startswith(("pca-goe:", "qr-fig4:"))]
    assert len(verdicts) == 2
    assert all(any(line.split(": ", 1)[1].startswith(s) for s in STATUSES) for line in verdicts)
    md = (out / "report.md").read_text()
    for name in ("pca-goe", "qr-fig4"):
        assert f'<a id="{name}"></a>' in md and f"[`{name}`](#{name})" in md
    figures = _linked_figures(md)
    assert {"figures/pca_goe_edge.png", "figures/fig4_stepsizes.png"} <= set(figures)
    for rel in figures:
        _png_ok(out / rel)
    assert "Dask LocalCluster" in md and "quick preset" in md


def test_every_experiment_reports_at_tiny_size(tmp_path):
    outcomes = write_report(EXPERIMENTS, preset="tiny", out=str(tmp_path), progress=False)
    md = (tmp_path / "report.md").read_text()
    assert set(outcomes) == {e.name for e in EXPERIMENTS}
    for exp in EXPERIMENTS:
        o = outcomes[exp.name]
        assert o.kind == exp.kind
        if exp.kind == PAPER:
            assert o.status in STATUSES
        else:
            assert re.fullmatch(r"measured: ((all \d+|\d+ of \d+|none of \d+) criteria held|"
                                r"its criterion (held|did not hold))", o.status), o.status
        assert verdict_line(o) in md
        assert o.checks and all(isinstance(c.passed, bool) for c in o.checks), exp.name
        assert o.figures and o.tables, exp.name
        assert f"## `{exp.name}`" in md and f"**Verdict: {o.status}.**" in md
        for stem in o.figures:
            assert os.path.exists(tmp_path / "figures" / f"{stem}.png")
    linked = _linked_figures(md)
    assert len(linked) == sum(len(o.figures) for o in outcomes.values())
    _png_ok(tmp_path / linked[0])
    # the summary other documents read: the same verdicts and counts as report.md
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["preset"] == "tiny"
    assert {n: e["status"] for n, e in summary["experiments"].items()} == \
        {n: o.status for n, o in outcomes.items()}
    assert sum(summary["counts"][PAPER].values()) == sum(e.kind == PAPER for e in EXPERIMENTS)
    assert sum(summary["counts"][BEYOND].values()) == sum(e.kind == BEYOND for e in EXPERIMENTS)
    for line in summary["count_lines"]:
        assert f"**{line}**" in md


def test_paper_items_and_measurements_are_counted_apart(tmp_path):
    from streamfit.experiments._runner import Task
    from streamfit.experiments._types import Experiment

    def make(name, kind, passed):
        return Experiment(name=name, paper="001", title=name, claim="c", kind=kind,
                          presets={"tiny": {}}, tasks=lambda p: [Task(_nothing, {}, 0)],
                          analyse=lambda p, r: Outcome(setting="s", checks=[
                              Check(f"c{i}", ok) for i, ok in enumerate(passed)]))
    exps = [make("p-all", PAPER, [True, True]), make("p-some", PAPER, [True, False]),
            make("b-all", BEYOND, [True]), make("b-some", BEYOND, [False, True, True]),
            make("b-none", BEYOND, [False])]
    out = write_report(exps, preset="tiny", out=str(tmp_path), progress=False)
    assert [out[e.name].status for e in exps] == [
        "reproduced", "partly", "measured: its criterion held",
        "measured: 2 of 3 criteria held", "measured: its criterion did not hold"]
    md = (tmp_path / "report.md").read_text()
    assert "**What the papers contain: 2 items -- 1 reproduced, 1 partly, " \
           "0 not reproduced.**" in md
    assert "**Beyond the papers: 3 measurements -- 1 with every criterion held, 1 with some " \
           "criteria held, 1 with none held.**" in md
    # a measurement is never "reproduced", and says whose criteria it uses
    head, _, body = md.partition("<a id=")
    assert head.count("| **reproduced** |") == 1
    assert body.count("*Beyond the papers: the criteria are ours, not a paper's.*") == 3
    with pytest.raises(ValueError, match="kind must be one of"):
        make("bad", "other", [True])


def _nothing(seed):
    return None


def test_cli_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--workers", "-1"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["--only", "no-such-experiment"])
    with pytest.raises(SystemExit):
        main(["--quick", "--full"])
    assert "--workers must be >= 0" in capsys.readouterr().err


def test_cli_lists_experiments(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(e.name in out for e in EXPERIMENTS)


def test_unknown_parameter_override_is_refused():
    with pytest.raises(ValueError, match="unknown parameter"):
        get_experiment("qr-fig4").params("quick", repz=3)
    with pytest.raises(ValueError, match="preset must be one of"):
        get_experiment("qr-fig4").params("huge")
    with pytest.raises(ValueError, match="unknown experiment"):
        get_experiment("fig-99")


def test_verdict_is_judged_from_the_checks():
    ok, no = Check("a held", True), Check("b failed", False)
    assert judge([ok, ok]) == "reproduced"
    assert judge([ok, no]) == "partly"
    assert judge([no]) == "not reproduced"
    assert judge([]) == "not reproduced"
    o = Outcome(setting="s", checks=[ok, no])
    assert o.verdict == "partly -- [ok] a held; [no] b failed"


def _needs_a_missing_package(seed):
    import importlib
    importlib.import_module("streamfit_no_such_package")


def test_missing_optional_package_is_reported_not_fatal(tmp_path):
    from streamfit.experiments._runner import Task
    from streamfit.experiments._types import Experiment

    broken = Experiment(name="needs-pkg", paper="001", title="t", claim="c",
                        presets={"tiny": {}},
                        tasks=lambda p: [Task(_needs_a_missing_package, {}, 0)],
                        analyse=lambda p, r: None)
    outcomes = write_report([broken, get_experiment("pca-goe")], preset="tiny",
                            out=str(tmp_path), progress=False)
    assert outcomes["needs-pkg"].status == "not run"
    assert "streamfit_no_such_package" in outcomes["needs-pkg"].verdict
    assert outcomes["pca-goe"].status in STATUSES
    md = (tmp_path / "report.md").read_text()
    assert "**Verdict: not run**" in md and "1 not run" in md


def test_progress_bars_name_each_experiment(tmp_path, capsys):
    exps = [get_experiment("pca-goe"), get_experiment("qr-fig2")]
    write_report(exps, preset="tiny", out=str(tmp_path), progress=True)
    err = capsys.readouterr().err
    assert "pca-goe" in err and "qr-fig2" in err and "task" in err
    write_report(exps, preset="tiny", out=str(tmp_path), progress=False)
    assert "pca-goe" not in capsys.readouterr().err
