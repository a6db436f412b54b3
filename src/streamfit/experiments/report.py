"""The report: run the experiments, draw their figures, judge their claims,
and write ``report.md`` beside the PNGs.

Layout of the output folder::

    report.md           per experiment: the paper's setting and claim, ours
                        (differences stated), the verdict, the figure, tables
    figures/*.png       one or more figures per experiment
"""
from __future__ import annotations

import datetime
import os
import platform
import re
import sys
import time

import numpy as np

from ._types import NOT_RUN, STATUSES, Outcome

__all__ = ["write_report", "markdown_table"]

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


def _section(exp, params, outcome, figures, n_tasks, seconds):
    if outcome.skipped:
        return "\n".join([f'<a id="{exp.name}"></a>', "", f"## `{exp.name}` — {_md(exp.title)}",
                          "", f"**Verdict: {NOT_RUN}** ({_md(outcome.skipped)}).", ""])
    out = [f'<a id="{exp.name}"></a>', "", f"## `{exp.name}` — {_md(exp.title)}", "",
           f"**Verdict: {outcome.status}.** " + "; ".join(
               ("✓ " if c.passed else "✗ ") + _md(c.text) for c in outcome.checks), "",
           f"**Paper** ({PAPERS.get(exp.paper, exp.paper)}). {_md(exp.claim)}", "",
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
    ...     sorted(os.listdir(out)), res["pca-goe"].status in ("reproduced", "partly",
    ...                                                         "not reproduced")
    (['figures', 'report.md'], True)
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
        for stem, fig in outcome.figures.items():
            fig.savefig(os.path.join(out, "figures", f"{stem}.png"), dpi=110)
        outcomes[exp.name] = outcome
        sections.append(_section(exp, params, outcome, list(outcome.figures), n_tasks, seconds))
        line = f"{exp.name}: {outcome.verdict}"
        summary.append((exp, outcome))
        if echo:
            echo(line)
    elapsed = time.perf_counter() - start
    head = _header(summary, preset, runner, elapsed, command)
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as fh:
        fh.write(head + "\n\n" + "\n".join(sections))
    return outcomes


def _header(summary, preset, runner, elapsed, command):
    import scipy
    import streamfit

    counts = {s: sum(o.status == s for _, o in summary) for s in STATUSES + (NOT_RUN,)}
    lines = ["# streamfit: the two papers, experiment by experiment", "",
             f"Generated {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} by "
             f"`{command or 'python -m streamfit'}` ({preset} preset) in {elapsed:.0f} s on "
             f"{runner.description}; streamfit {streamfit.__version__}, numpy "
             f"{np.__version__}, scipy {scipy.__version__}, Python "
             f"{platform.python_version()} ({sys.platform}); one BLAS thread per task.", "",
             "Each verdict is computed from the measurements by the criteria stated beside it "
             "(✓ held, ✗ did not): *reproduced* when every criterion holds, *partly* when "
             "some do, *not reproduced* when none does. For the PCA paper, which has no "
             "experiments, the criteria test its theorems' claims.", "",
             "| experiment | paper | claim | verdict |", "|---|---|---|---|"]
    for exp, outcome in summary:
        lines.append(f"| [`{exp.name}`](#{exp.name}) | {exp.paper} | {_md(exp.title)} | "
                     f"**{outcome.status}** |")
    lines += ["", ", ".join(f"{counts[s]} {s}" for s in STATUSES + (NOT_RUN,) if counts[s]
                            or s != NOT_RUN) + "."]
    return "\n".join(lines)
