"""The report: run the experiments, draw their figures, judge their claims,
and write ``report.md`` beside the PNGs.

Layout of the output folder::

    report.md           per experiment: the paper's setting and claim, ours
                        (differences stated), the verdict, the figure, tables
    report-summary.json the counts, every verdict and its criteria, and the
                        headline numbers other documents quote (so that they
                        take them from here instead of copying them)
    figures/*.png       one or more figures per experiment

Paper items (a figure, theorem or remark of one of the papers) are judged
"reproduced", "partly" or "not reproduced"; everything else (other data,
streams and estimators the papers never ran, open questions, our own
investigations) is "measured", with the number of its criteria that held,
and is counted apart.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import re
import sys
import time

import numpy as np

from ._types import BEYOND, GRADES, NOT_RUN, PAPER, STATUSES, Outcome

__all__ = ["write_report", "markdown_table", "verdict_line", "SUMMARY_FILE"]

SUMMARY_FILE = "report-summary.json"

PAPERS = {
    "001": "Shen, Xia & Zhou, *Online Quantile Regression*, JMLR 26 (2025)",
    "000": "Kotłowski & Warmuth, *PCA with Gaussian perturbations*",
}


def _fmt(v):
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}" if abs(int(v)) >= 10_000 else str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if np.isnan(v):
            return "--"
        if np.isinf(v):
            return "diverged" if v > 0 else "-inf"
        if v == 0:
            return "0"
        if 1e-3 <= abs(v) < 1e5:
            return f"{v:.4g}"
        return f"{v:.3g}"
    return str(v)


def markdown_table(table):
    """A dict of equal-length columns as a Markdown table.

    Examples
    --------
    >>> from streamfit.experiments import markdown_table
    >>> print(markdown_table({"n": [10, 20], "err / E|xi|": [0.5, 1e-7]}))
    | n | err / E\\|xi\\| |
    |---|---|
    | 10 | 0.5 |
    | 20 | 1e-07 |
    """
    cols = list(table)

    def cell(text):
        # a "|" inside a cell (E|xi|) would end it
        return _md(str(text)).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, cols)) + " |", "|" + "---|" * len(cols)]
    for row in zip(*(table[c] for c in cols)):
        lines.append("| " + " | ".join(cell(_fmt(v)) for v in row) + " |")
    return "\n".join(lines)


def _md(text):
    """Plain text for Markdown: a '*' right after a symbol (beta*, sigma*^2) is
    escaped, so that two of them do not italicise the words between; '**bold**'
    and '*italic*' that open after a space are left alone."""
    return re.sub(r"(?<=[\w)\]|])\*(?!\*)", r"\\*", text)


def verdict_line(outcome):
    """The section's verdict line exactly as report.md has it: the status,
    then every criterion with its measured numbers, marked held or not."""
    if outcome.skipped:
        return f"**Verdict: {NOT_RUN}** ({_md(outcome.skipped)})."
    return f"**Verdict: {outcome.status}.** " + "; ".join(
        ("✓ " if c.passed else "✗ ") + _md(c.text) for c in outcome.checks)


def _section(exp, params, outcome, figures, n_tasks, seconds):
    head = [f'<a id="{exp.name}"></a>', "", f"## `{exp.name}` — {_md(exp.title)}", ""]
    if outcome.skipped:
        return "\n".join(head + [verdict_line(outcome), ""])
    out = head + [verdict_line(outcome), ""]
    if exp.kind == BEYOND:
        out += ["*Beyond the papers: the criteria are ours, not a paper's.*", ""]
    out += [f"**Paper** ({PAPERS.get(exp.paper, exp.paper)}). {_md(exp.claim)}", "",
            f"**Ours.** {_md(outcome.setting)}", ""]
    for stem in figures:
        out += [f"![{exp.name}: {stem}](figures/{stem}.png)", ""]
    for caption, table in outcome.tables:
        out += [f"*{_md(caption)}*", "", markdown_table(table), ""]
    if outcome.notes:
        out += [_md(outcome.notes.strip()), ""]
    out += [f"<sub>{n_tasks} task(s), {seconds:.1f} s of task time; parameters: "
            f"{', '.join(f'{k}={v}' for k, v in params.items())}</sub>", ""]
    return "\n".join(out)


def write_report(experiments, *, preset="quick", out="streamfit-report", runner=None,
                 progress=True, overrides=None, echo=None, command=None):
    """Run ``experiments`` (Experiment objects) and write the report folder.

    All experiments' tasks are submitted to ``runner`` first and gathered in
    order, so a cluster stays busy while finished experiments are analysed.
    ``overrides`` maps an experiment name to parameter overrides of the
    preset; ``echo`` (e.g. ``print``) receives one verdict line per experiment.
    Returns a dict name -> Outcome.

    Examples
    --------
    >>> import tempfile, os
    >>> from streamfit.experiments import get_experiment, write_report
    >>> exp = get_experiment("pca-goe")
    >>> with tempfile.TemporaryDirectory() as out:
    ...     res = write_report([exp], out=out, progress=False,
    ...                        overrides={"pca-goe": {"sizes": (10, 40), "reps": 4,
    ...                                               "ks": (1, 2)}})
    ...     done = ("reproduced", "partly", "not reproduced")
    ...     sorted(os.listdir(out)), res["pca-goe"].status in done
    (['figures', 'report-summary.json', 'report.md'], True)
    """
    from ._runner import SequentialRunner

    runner = runner or SequentialRunner()
    overrides = overrides or {}
    os.makedirs(os.path.join(out, "figures"), exist_ok=True)
    start = time.perf_counter()
    plan = []
    for exp in experiments:
        params = exp.params(preset, **overrides.get(exp.name, {}))
        tasks = exp.tasks(params)
        plan.append((exp, params, len(tasks), runner.submit(tasks)))
    sections, outcomes, summary = [], {}, []
    for exp, params, n_tasks, pending in plan:
        try:
            results, seconds = runner.gather(pending, desc=exp.name, progress=progress)
            outcome = exp.analyse(params, results)
        except ImportError as exc:
            # an optional package (e.g. statsmodels for its data sets) is missing:
            # say so in the report and go on with the other experiments
            outcome, seconds = Outcome(setting="", skipped=f"needs {exc.name or exc}: "
                                       "pip install 'streamfit[report]'"), 0.0
        outcome.kind = exp.kind
        for stem, fig in outcome.figures.items():
            fig.savefig(os.path.join(out, "figures", f"{stem}.png"), dpi=110)
        outcomes[exp.name] = outcome
        sections.append(_section(exp, params, outcome, list(outcome.figures), n_tasks, seconds))
        line = f"{exp.name}: {outcome.verdict}"
        summary.append((exp, outcome))
        if echo:
            echo(line)
    elapsed = time.perf_counter() - start
    stamp = datetime.datetime.now().strftime('%Y-%m-%d %H:%M')
    head = _header(summary, preset, runner, elapsed, command, stamp)
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as fh:
        fh.write(head + "\n\n" + "\n".join(sections))
    with open(os.path.join(out, SUMMARY_FILE), "w", encoding="utf-8") as fh:
        json.dump(_summary(summary, preset, runner, elapsed, command, stamp), fh, indent=1,
                  ensure_ascii=False, default=_json_number)
        fh.write("\n")
    return outcomes


def _counts(summary):
    """{"paper": {status: count}, "beyond": {grade: count}} over the run."""
    paper = {st: 0 for st in STATUSES + (NOT_RUN,)}
    beyond = {g: 0 for g in GRADES + (NOT_RUN,)}
    for exp, o in summary:
        if exp.kind == PAPER:
            paper[o.status] += 1
        else:
            beyond[NOT_RUN if o.skipped else GRADES[o.grade]] += 1
    return {PAPER: paper, BEYOND: beyond}


def count_lines(summary):
    """The two count sentences of the report's head (paper items, and the
    measurements beyond the papers), in words."""
    counts = _counts(summary)
    p, b = counts[PAPER], counts[BEYOND]
    n_p = sum(1 for e, _ in summary if e.kind == PAPER)
    n_b = len(summary) - n_p

    def listed(c, names):
        return ", ".join(f"{c[s]} {w}" for s, w in names if c[s] or s != NOT_RUN)
    paper = (f"**What the papers contain: {n_p} items -- "
             + listed(p, [(s, s) for s in STATUSES + (NOT_RUN,)]) + ".**")
    beyond = (f"**Beyond the papers: {n_b} measurements -- "
              + listed(b, [(GRADES[0], "with every criterion held"),
                           (GRADES[1], "with some criteria held"),
                           (GRADES[2], "with none held"), (NOT_RUN, "not run")]) + ".**")
    return paper, beyond


def _header(summary, preset, runner, elapsed, command, stamp):
    import scipy
    import streamfit

    paper_line, beyond_line = count_lines(summary)
    lines = ["# streamfit: the two papers, experiment by experiment", "",
             f"Generated {stamp} by "
             f"`{command or 'python -m streamfit'}` ({preset} preset) in {elapsed:.0f} s on "
             f"{runner.description}; streamfit {streamfit.__version__}, numpy "
             f"{np.__version__}, scipy {scipy.__version__}, Python "
             f"{platform.python_version()} ({sys.platform}, {platform.machine()}); one BLAS "
             f"thread per task. The numbers other documents quote are in "
             f"[`{SUMMARY_FILE}`]({SUMMARY_FILE}), written by the same run.", "",
             paper_line, "",
             "Each is a figure, theorem or remark of one of the two papers, judged by the "
             "criteria stated beside its verdict (✓ held, ✗ did not): *reproduced* when "
             "every criterion holds, *partly* when some do, *not reproduced* when none does. "
             "The PCA paper has no experiments: its items test its theorems' statements.", "",
             "| experiment | paper | claim | verdict |", "|---|---|---|---|"]
    for exp, outcome in summary:
        if exp.kind == PAPER:
            lines.append(f"| [`{exp.name}`](#{exp.name}) | {exp.paper} | {_md(exp.title)} | "
                         f"**{outcome.status}** |")
    lines += ["", beyond_line, "",
              "Other data, streams and estimators the papers never ran, their open questions, "
              "and our investigations of paper items. The criteria are ours: the verdict "
              "says how many held, and never *reproduced*.", "",
              "| experiment | paper | what | verdict |", "|---|---|---|---|"]
    for exp, outcome in summary:
        if exp.kind == BEYOND:
            lines.append(f"| [`{exp.name}`](#{exp.name}) | {exp.paper} | {_md(exp.title)} | "
                         f"**{outcome.status}** |")
    return "\n".join(lines)


def _json_number(v):
    # numpy scalars and arrays in an experiment's summary
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def _clean(v):
    # NaN and inf are not JSON: null
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return None
    return v


def _summary(summary, preset, runner, elapsed, command, stamp):
    import scipy
    import streamfit

    paper_line, beyond_line = count_lines(summary)
    return _clean({
        "generated": stamp, "command": command or "python -m streamfit", "preset": preset,
        "seconds": round(elapsed), "runner": runner.description,
        "versions": {"streamfit": streamfit.__version__, "numpy": np.__version__,
                     "scipy": scipy.__version__, "python": platform.python_version(),
                     "platform": f"{sys.platform}-{platform.machine()}"},
        "counts": _counts(summary),
        "count_lines": [paper_line.strip("*"), beyond_line.strip("*")],
        "experiments": {
            exp.name: {"paper": exp.paper, "kind": exp.kind, "title": exp.title,
                       "status": o.status, "skipped": o.skipped or None,
                       "criteria": [{"text": c.text, "held": c.passed} for c in o.checks],
                       "headline": o.summary}
            for exp, o in summary},
    })
