"""The main job writes the report folder: report.md with every experiment's
section and verdict, and the PNG figures it links."""
import json
import os
import re

import pytest

from streamfit.__main__ import main
from streamfit.experiments import EXPERIMENTS, get_experiment, write_report
from streamfit.experiments._types import BEYOND, CLAIM, CORRECTION, NOT_RUN, PAPER, SANITY, \
    STATUSES, VARIANT, Check, Outcome, judge
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
    # one line per finished experiment: its verdict and its times
    verdicts = re.findall(r"^\[\d/2\] (pca-goe|qr-fig4): (.*?) -- (\d+) s of task time "
                          r"\((\d+) s CPU\), (\d+) s since the start$", printed, flags=re.M)
    assert sorted(v[0] for v in verdicts) == ["pca-goe", "qr-fig4"]
    assert all(v[1] in STATUSES for v in verdicts)
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
        assert verdict_line(o) in md
        if o.skipped:
            # the news data of qr-table1 are not supplied: said, with how to supply them
            assert exp.name == "qr-table1" and "data not supplied" in o.skipped
            assert "--data PATH" in o.skipped and "**Verdict: not run**" in md
            continue
        if exp.kind == PAPER:
            assert o.status in STATUSES
            assert any(c.role == CLAIM for c in o.checks), exp.name
        else:
            assert re.fullmatch(r"measured: ((all \d+|\d+ of \d+|none of \d+) criteria held|"
                                r"its criterion (held|did not hold))", o.status), o.status
        assert o.checks and all(isinstance(c.passed, bool) for c in o.checks), exp.name
        # a paper's failed criterion says what it required (a measurement's
        # criteria state their thresholds in their own text)
        assert exp.kind != PAPER or all(c.requires or c.passed or c.role != CLAIM
                                        for c in o.checks), exp.name
        assert o.figures and o.tables, exp.name
        assert f"## `{exp.name}`" in md and f"**Verdict: {o.status}" in md
        for stem in o.figures:
            assert os.path.exists(tmp_path / "figures" / f"{stem}.png")
    linked = _linked_figures(md)
    assert len(linked) == sum(len(o.figures) for o in outcomes.values())
    # the papers by name, never by their seed numbers
    assert "Shen, Xia & Zhou" in md and "Kotłowski & Warmuth" in md
    assert "| 000 |" not in md and "| 001 |" not in md
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

    def make(name, kind, checks):
        return Experiment(name=name, paper="001", title=name, claim="c", kind=kind,
                          presets={"tiny": {}}, tasks=lambda p: [Task(_nothing, {}, 0)],
                          analyse=lambda p, r: Outcome(setting="s", checks=checks))
    claim_ok, claim_no = Check("c held", True), Check("c failed", False, requires="r")
    against = Check("c refuted", False, requires="inside [0, 1]", against=True)
    fixed = Check("the correction", True, role=CORRECTION)
    variant = Check("a library variant", True, role=VARIANT)
    exps = [make("p-all", PAPER, [claim_ok, claim_ok, Check("v failed", False, role=VARIANT)]),
            make("p-some", PAPER, [claim_ok, claim_no, variant]),
            make("p-against", PAPER, [claim_ok, against, fixed]),
            make("b-all", BEYOND, [Check("x", True)]),
            make("b-some", BEYOND, [Check("x", False), Check("y", True), Check("z", True)]),
            make("b-none", BEYOND, [Check("x", False)])]
    out = write_report(exps, preset="tiny", out=str(tmp_path), progress=False)
    assert [out[e.name].status for e in exps] == [
        "reproduced", "not reproduced", "contradicted", "measured: its criterion held",
        "measured: 2 of 3 criteria held", "measured: its criterion did not hold"]
    md = (tmp_path / "report.md").read_text()
    assert "**What the papers contain: 3 items -- 1 reproduced, 1 contradicted, " \
           "1 not reproduced.**" in md
    assert "**Beyond the papers: 3 measurements -- 1 with every criterion held, 1 with some " \
           "criteria held, 1 with none held.**" in md
    # the header says what the run took: wall, the tasks' time and CPU time, the load
    assert re.search(r"^Generated .* in \d+ s wall on sequential, in this process; its tasks "
                     r"took \d+ s \(\d+ s CPU\)(, load average [\d.]+ at the start and "
                     r"[\d.]+ at the end on \d+ cores)?;", md, flags=re.M), md[:600]
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert set(summary["runs"][-1]) >= {"seconds", "task_seconds", "task_cpu_seconds", "load"}
    # a failed criterion says what it required; evidence against a claim is noted
    assert "✗ c refuted (*required: inside [0, 1]; the data speak against it*)" in md
    assert "**Evidence against the paper's claim:** c refuted." in md
    # variants are reported beside the verdict and never raise it
    assert "*Beside the verdict (the library's variants):* ✗ v failed" in md
    head, _, body = md.partition("<a id=")
    assert head.count("| **reproduced** |") == 1
    assert body.count("*Beyond the papers: the criteria are ours, not a paper's.*") == 3
    # findings.md lists the failed and contradicted claims, from the same run
    findings = (tmp_path / "findings.md").read_text()
    assert "## Contradicted" in findings and "Claim failed: c refuted" in findings
    assert "Correction (held): the correction" in findings
    with pytest.raises(ValueError, match="kind must be one of"):
        make("bad", "other", [claim_ok])


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


def test_verdict_is_judged_from_the_papers_criteria():
    ok, no = Check("a held", True), Check("b failed", False)
    refuted = Check("b refuted", False, against=True)
    correction, wrong_fix = Check("fix", True, role=CORRECTION), Check("fix", False,
                                                                      role=CORRECTION)
    assert judge([ok, ok]) == "reproduced"
    assert judge([ok, no]) == "not reproduced"
    # contradicted needs evidence against and a correction that holds
    assert judge([ok, refuted, correction]) == "contradicted"
    assert judge([ok, refuted]) == "not reproduced"
    assert judge([ok, refuted, wrong_fix]) == "not reproduced"
    assert judge([ok, no, correction]) == "not reproduced"
    # variants and sanity checks never change it
    assert judge([ok, Check("v", False, role=VARIANT), Check("s", False, role=SANITY)]) == \
        "reproduced"
    assert judge([no, Check("v", True, role=VARIANT)]) == "not reproduced"
    with pytest.raises(ValueError, match="at least one criterion with role CLAIM"):
        judge([Check("v", True, role=VARIANT)])
    with pytest.raises(ValueError, match="role must be one of"):
        Check("x", True, role="other")
    # a criterion that held is never evidence against
    assert not Check("x", True, against=True).against
    o = Outcome(setting="s", checks=[ok, no])
    assert o.verdict == "not reproduced -- [ok] a held; [no] b failed"


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
    assert outcomes["needs-pkg"].status == NOT_RUN
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
