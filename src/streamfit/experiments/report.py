"""The report: run the experiments, draw their figures, judge their claims,
and write ``report.md`` beside the PNGs.

Layout of the output folder::

    report.md           per experiment: the paper's setting and claim, ours
                        (differences stated), the verdict and its criteria,
                        the figure, tables
    report-summary.json the counts, every verdict and its criteria, the
                        headline numbers other documents quote, each
                        experiment's time and the runs that made the report
    findings.md         where a paper's claim failed or was contradicted, and
                        the corrections, generated from the same run
    figures/*.png       one or more figures per experiment

Paper items (a figure, theorem or remark of one of the papers) are judged by
the paper's own words (see :mod:`streamfit.experiments._types`); everything
else (other data, streams and estimators the papers never ran, open
questions, our own investigations) is "measured", with the number of its
criteria that held, and is counted apart.

Every file is written to a temporary file in its folder and renamed over
the old one, so an interrupted run leaves the previous report whole. A run
of some experiments into a folder that holds a report updates their
sections and keeps the others (it never shrinks a report), or refuses,
saying how, when the two cannot be merged.
"""
from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import os
import platform
import re
import sys
import tempfile
import time

import numpy as np

from ._types import BEYOND, CLAIM, CORRECTION, GRADES, NOT_RUN, PAPER, SANITY, STATUSES, \
    VARIANT, Outcome

__all__ = ["write_report", "markdown_table", "verdict_line", "SUMMARY_FILE", "FINDINGS_FILE",
           "ReportMergeError", "check_writable"]

SUMMARY_FILE = "report-summary.json"
FINDINGS_FILE = "findings.md"

#: the two papers, by the seeds' file numbers (000, 001)
PAPERS = {
    "001": "Shen, Xia & Zhou, *Online Quantile Regression*, JMLR 26 (2025)",
    "000": "Kotłowski & Warmuth, *PCA with Gaussian perturbations*",
}
SHORT = {"001": "Shen, Xia & Zhou (quantile regression)",
         "000": "Kotłowski & Warmuth (online PCA)"}
_ROLE_HEADS = {CLAIM: "The paper's claims", CORRECTION: "The correction, checked",
               VARIANT: "Beside the verdict (the library's variants)",
               SANITY: "Beside the verdict (sanity checks)"}


class ReportMergeError(ValueError):
    """The folder holds a report this run cannot update: the message says how
    to proceed."""


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


def _mark(c):
    """One criterion as the report prints it: held or not, and, when it failed,
    what it required and whether the data speak against the statement."""
    text = ("✓ " if c["held"] else "✗ ") + _md(c["text"])
    if not c["held"]:
        extra = []
        if c.get("requires"):
            extra.append(f"required: {_md(c['requires'])}")
        if c.get("against"):
            extra.append("the data speak against it")
        if extra:
            text += f" (*{'; '.join(extra)}*)"
    return text


def _criteria(outcome):
    return [{"text": c.text, "held": c.passed, "role": c.role, "requires": c.requires,
             "against": c.against} for c in outcome.checks]


def _verdict_text(entry):
    """The verdict paragraph from a summary entry (see _entry)."""
    status = entry["status"]
    if entry.get("skipped"):
        return f"**Verdict: {NOT_RUN}** ({_md(entry['skipped'])})."
    if entry.get("untestable"):
        return f"**Verdict: {STATUSES[3]}** ({_md(entry['untestable'])})."
    crit = entry["criteria"]
    if entry["kind"] == BEYOND:
        return f"**Verdict: {status}.** " + "; ".join(_mark(c) for c in crit)
    claims = [c for c in crit if c["role"] == CLAIM]
    held = sum(c["held"] for c in claims)
    parts = [f"**Verdict: {status}** ({held} of {len(claims)} of the paper's criteria held)."]
    for role in (CLAIM, CORRECTION, VARIANT, SANITY):
        group = [c for c in crit if c["role"] == role]
        if group:
            parts.append(f"*{_ROLE_HEADS[role]}:* " + "; ".join(_mark(c) for c in group))
    return " ".join(parts)


def verdict_line(outcome, kind=None):
    """The section's verdict paragraph exactly as report.md has it: the status,
    then every criterion with its measured numbers, marked held or not,
    grouped by role (the paper's claims, corrections, the library's variants
    and sanity checks, which never change a paper item's verdict)."""
    kind = kind or outcome.kind
    return _verdict_text({"status": outcome.status, "kind": kind, "skipped": outcome.skipped,
                          "untestable": outcome.untestable, "criteria": _criteria(outcome)})


def _against(entry):
    """The claims the data speak against, for the evidence note."""
    return [c for c in entry["criteria"] if c["role"] == CLAIM and c.get("against")]


def _section(exp, params, outcome, figures, n_tasks, seconds, stamp):
    entry = _entry(exp, outcome, seconds, stamp)
    head = [f'<a id="{exp.name}"></a>', "", f"## `{exp.name}` — {_md(exp.title)}", ""]
    if outcome.skipped or outcome.untestable:
        return "\n".join(head + [_verdict_text(entry), "",
                                 f"**Paper** ({PAPERS.get(exp.paper, exp.paper)}). "
                                 f"{_md(exp.claim)}", ""])
    out = head + [_verdict_text(entry), ""]
    against = _against(entry)
    if against:
        out += ["**Evidence against the paper's claim:** " + "; ".join(
            _md(c["text"]) for c in against) + ".", ""]
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
    out += [f"<sub>{n_tasks} task(s), {seconds:.1f} s of task time, run {stamp}; parameters: "
            f"{', '.join(f'{k}={v}' for k, v in params.items())}</sub>", ""]
    return "\n".join(out)


def _entry(exp, outcome, seconds, stamp):
    return {"paper": exp.paper, "kind": exp.kind, "title": exp.title,
            "status": outcome.status, "skipped": outcome.skipped or None,
            "untestable": outcome.untestable or None, "criteria": _criteria(outcome),
            "headline": outcome.summary, "task_seconds": round(float(seconds), 1),
            "run": stamp}


# -- files: written whole or not at all ----------------------------------------------------

def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: read once, at import (os.umask can only be read by setting it)
_UMASK = _current_umask()


@contextlib.contextmanager
def _replacing(path, mode="w"):
    """Open a temporary file beside ``path``; on success it replaces ``path``
    (os.replace: atomic on one file system); on any error or interrupt it is
    removed and ``path`` is untouched. The file gets the permissions an
    ordinary open() would give it (mkstemp's are 0600: a report nobody else
    could read)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                               dir=folder)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, mode, **({"encoding": "utf-8"} if "b" not in mode else {})) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _save_figure(fig, path):
    with _replacing(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)


def check_writable(out):
    """Make ``out`` and ``out/figures`` and write (and remove) a file in each,
    so that an unwritable folder fails now, before any work, with an error
    that names it."""
    try:
        for folder in (out, os.path.join(out, "figures")):
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".streamfit-probe.", dir=folder)
            os.close(fd)
            os.unlink(tmp)
    except OSError as exc:
        raise PermissionError(f"the report folder {out!r} is not writable ({exc.strerror or exc}"
                              "): choose another with --out DIR") from None


# -- merging into an existing report ---------------------------------------------------

_ANCHOR = re.compile(r'^<a id="([^"]+)"></a>$', re.M)


def _read_existing(out):
    """(sections by name, summary) of the report in ``out``, or (None, None)
    when the folder holds none; ReportMergeError when it holds one that
    cannot be read."""
    md_path, js_path = os.path.join(out, "report.md"), os.path.join(out, SUMMARY_FILE)
    if not os.path.exists(md_path):
        return None, None
    how = (f"write this run elsewhere (--out OTHER_DIR), run every experiment into {out!r} "
           f"(no --only), or move {md_path!r} away")
    try:
        with open(md_path, encoding="utf-8") as fh:
            md = fh.read()
        with open(js_path, encoding="utf-8") as fh:
            summary = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ReportMergeError(f"{out!r} holds a report.md whose {SUMMARY_FILE} cannot be read "
                               f"({exc}), so its sections cannot be kept; {how}") from None
    marks = list(_ANCHOR.finditer(md))
    sections = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(md)
        sections[m.group(1)] = md[m.start():end].rstrip("\n") + "\n"
    known = summary.get("experiments") if isinstance(summary, dict) else None
    if not isinstance(known, dict) or set(known) != set(sections):
        raise ReportMergeError(f"{out!r} holds a report.md whose sections do not match its "
                               f"{SUMMARY_FILE} (edited by hand, or written by another "
                               f"version?), so they cannot be kept; {how}")
    for name, entry in known.items():
        if not isinstance(entry, dict) or "criteria" not in entry or "kind" not in entry:
            raise ReportMergeError(f"{out!r}: {SUMMARY_FILE} has no verdict record for "
                                   f"{name!r} (written by another version?); {how}")
    return sections, summary


def _merge_plan(out, names, preset):
    """The existing sections to keep (name -> (markdown, summary entry)) and
    the runs behind them; refuses (ReportMergeError) what cannot be merged."""
    sections, summary = _read_existing(out)
    if sections is None:
        return {}, []
    keep = {n: (s, summary["experiments"][n]) for n, s in sections.items() if n not in names}
    if keep and summary.get("preset") != preset:
        raise ReportMergeError(
            f"{out!r} holds a report of the {summary.get('preset')!r} preset with sections this "
            f"run does not redo ({', '.join(sorted(keep))}); a {preset!r} run of "
            f"{', '.join(sorted(names))} would mix presets in one report. Run with "
            f"--{summary.get('preset')} (the report's preset), write elsewhere with --out, or "
            f"run every experiment")
    return keep, (summary.get("runs") or [])


# -- the run ----------------------------------------------------------------------------

def write_report(experiments, *, preset="quick", out="streamfit-report", runner=None,
                 progress=True, overrides=None, echo=None, command=None):
    """Run ``experiments`` (Experiment objects) and write the report folder.

    All experiments' tasks are submitted to ``runner`` first; each experiment
    is analysed, drawn and announced (``echo``, e.g. ``print``: one line with
    its verdict and times) as soon as its tasks are done, in whatever order
    they finish. ``overrides`` maps an experiment name to parameter overrides
    of the preset. When ``out`` already holds a report, the sections of
    ``experiments`` replace theirs and the others are kept (ReportMergeError,
    saying how to proceed, when they cannot be: another preset, an
    unreadable report). Returns a dict name -> Outcome.

    Examples
    --------
    >>> import tempfile, os
    >>> from streamfit.experiments import get_experiment, write_report
    >>> exp = get_experiment("pca-goe")
    >>> with tempfile.TemporaryDirectory() as out:
    ...     res = write_report([exp], out=out, progress=False)   # a few seconds
    ...     sorted(os.listdir(out)), res["pca-goe"].status
    (['figures', 'findings.md', 'report-summary.json', 'report.md'], 'contradicted')
    """
    from ._runner import SequentialRunner

    runner = runner or SequentialRunner()
    overrides = overrides or {}
    check_writable(out)
    names = [e.name for e in experiments]
    keep, runs = _merge_plan(out, set(names), preset)
    stamp = datetime.datetime.now().strftime('%Y-%m-%d %H:%M')
    start = time.perf_counter()
    load0 = _load()
    plan, solo = {}, {}
    alone = SequentialRunner()
    for exp in experiments:
        params = exp.params(preset, **overrides.get(exp.name, {}))
        tasks = exp.tasks(params)
        if exp.solo:
            # timed alone: run here once every other task has finished
            solo[exp.name] = (exp, params, len(tasks), alone.submit(tasks))
        else:
            plan[exp.name] = (exp, params, len(tasks), runner.submit(tasks))
    done, outcomes = {}, {}
    # lazily: each experiment is analysed and announced as soon as it is done
    order = itertools.chain(((name, runner, plan) for name in _finished(runner, plan)),
                            ((name, alone, solo) for name in solo))
    for name, run, where in order:
        exp, params, n_tasks, pending = where[name]
        cpu = 0.0
        try:
            results, seconds = run.gather(pending, desc=exp.name, progress=progress)
            cpu = run.last_cpu
            outcome = exp.analyse(params, results)
        except ImportError as exc:
            # an optional package (e.g. statsmodels for its data sets) is missing:
            # say so in the report and go on with the other experiments
            outcome, seconds = Outcome(setting="", skipped=f"needs {exc.name or exc}: "
                                       "pip install 'streamfit[report]'"), 0.0
        outcome.kind = exp.kind
        for stem, fig in outcome.figures.items():
            _save_figure(fig, os.path.join(out, "figures", f"{stem}.png"))
        outcomes[name] = outcome
        entry = _entry(exp, outcome, seconds, stamp)
        entry["task_cpu_seconds"] = round(float(cpu), 1)
        done[name] = (_section(exp, params, outcome, list(outcome.figures), n_tasks, seconds,
                               stamp), entry)
        if echo:
            echo(f"[{len(done)}/{len(experiments)}] {name}: {outcome.status} -- "
                 f"{seconds:.0f} s of task time ({cpu:.0f} s CPU)"
                 f"{' (timed alone)' if exp.solo else ''}, "
                 f"{time.perf_counter() - start:.0f} s since the start")
    elapsed = time.perf_counter() - start
    # what the run cost, told truly: the wall time, and (on a machine shared with
    # other work, where the wall time says little) the tasks' own time and CPU
    # time, with the load average the run met
    runs = runs + [{"command": command or "python -m streamfit", "generated": stamp,
                    "seconds": round(elapsed), "runner": runner.description,
                    "experiments": names,
                    "task_seconds": round(sum(e["task_seconds"] for _, e in done.values())),
                    "task_cpu_seconds": round(sum(e["task_cpu_seconds"]
                                                  for _, e in done.values())),
                    "load": [load0, _load()], "cores": os.cpu_count()}]
    _write_folder(out, preset, keep, done, runs)
    return outcomes


def _load():
    """The 1-minute load average (None where the system has none)."""
    try:
        return round(os.getloadavg()[0], 1)
    except (AttributeError, OSError):
        return None


def _run_cost(run):
    """'in W s wall on RUNNER; its tasks took T s (C s CPU), load average A at
    the start and B at the end on N cores' from a run record (records of
    earlier versions lack the parts after the runner)."""
    text = f"in {run['seconds']} s wall on {run['runner']}"
    if "task_cpu_seconds" in run:
        text += (f"; its tasks took {run['task_seconds']} s ({run['task_cpu_seconds']} s "
                 "CPU)")
    load = run.get("load") or [None, None]
    if None not in load:
        text += f", load average {load[0]:g} at the start and {load[1]:g} at the end"
        if run.get("cores"):
            text += f" on {run['cores']} cores"
    return text


def _finished(runner, plan):
    """The experiments' names in the order their tasks finish (report order
    among those already done); a sequential runner runs them in order."""
    left = list(plan)
    while left:
        ready = [n for n in left if runner.ready(plan[n][3])]
        if not ready:
            runner.wait_any([f for n in left for f in plan[n][3]])
            continue
        for name in ready:
            left.remove(name)
            yield name


def _report_order(names):
    from . import EXPERIMENTS

    order = {e.name: i for i, e in enumerate(EXPERIMENTS)}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


def _write_folder(out, preset, keep, done, runs):
    """report.md, the summary and findings from the kept and the new
    sections (report order), each file written whole, report.md last; the
    kept experiments' figures are left, the redone ones' old figures that
    the new report no longer links are removed."""
    sections = {n: s for n, (s, _) in keep.items()}
    entries = {n: e for n, (_, e) in keep.items()}
    old_figures = set()
    md_path = os.path.join(out, "report.md")
    if os.path.exists(md_path):
        with open(md_path, encoding="utf-8") as fh:
            old_figures = set(re.findall(r"\]\((figures/[^)]+\.png)\)", fh.read()))
    for name, (section, entry) in done.items():
        sections[name], entries[name] = section, entry
    order = _report_order(sections)
    summary = _summary(entries, order, preset, runs)
    body = "\n".join(sections[n] for n in order)
    head = _header(summary, order)
    with _replacing(os.path.join(out, SUMMARY_FILE)) as fh:
        json.dump(summary, fh, indent=1, ensure_ascii=False, default=_json_number)
        fh.write("\n")
    with _replacing(os.path.join(out, FINDINGS_FILE)) as fh:
        fh.write(findings_markdown(summary, order))
    with _replacing(md_path) as fh:
        fh.write(head + "\n\n" + body)
    linked = set(re.findall(r"\]\((figures/[^)]+\.png)\)", body))
    for rel in old_figures - linked:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(out, rel))


def _counts(entries, order):
    """{"paper": {status: count}, "beyond": {grade: count}} over the report."""
    paper = {st: 0 for st in STATUSES + (NOT_RUN,)}
    beyond = {g: 0 for g in GRADES + (NOT_RUN,)}
    for name in order:
        e = entries[name]
        if e["kind"] == PAPER:
            paper[e["status"]] += 1
        elif e.get("skipped"):
            beyond[NOT_RUN] += 1
        else:
            held = [c["held"] for c in e["criteria"]]
            beyond[GRADES[0 if held and all(held) else (1 if any(held) else 2)]] += 1
    return {PAPER: paper, BEYOND: beyond}


def count_lines(counts):
    """The two count sentences of the report's head (paper items, and the
    measurements beyond the papers), in words."""
    p, b = counts[PAPER], counts[BEYOND]

    def listed(c, names):
        return ", ".join(f"{c[s]} {w}" for s, w in names if c[s] or s not in (NOT_RUN,
                                                                                STATUSES[3]))
    paper = (f"**What the papers contain: {sum(p.values())} items -- "
             + listed(p, [(s, s) for s in STATUSES + (NOT_RUN,)]) + ".**")
    beyond = (f"**Beyond the papers: {sum(b.values())} measurements -- "
              + listed(b, [(GRADES[0], "with every criterion held"),
                           (GRADES[1], "with some criteria held"),
                           (GRADES[2], "with none held"), (NOT_RUN, "not run")]) + ".**")
    return paper, beyond


def _header(summary, order):
    import scipy
    import streamfit

    paper_line, beyond_line = count_lines(summary["counts"])
    entries = summary["experiments"]
    runs = summary["runs"]
    last = runs[-1]
    made = (f"Generated {last['generated']} by `{last['command']}` ({summary['preset']} "
            f"preset) {_run_cost(last)}")
    if len(runs) > 1:
        made += ("; sections of earlier runs kept: " + "; ".join(
            f"`{r['command']}` ({r['generated']}, {r['seconds']} s)" for r in runs[:-1]))
    lines = ["# streamfit: the two papers, experiment by experiment", "",
             f"{made}; streamfit {streamfit.__version__}, numpy {np.__version__}, scipy "
             f"{scipy.__version__}, Python {platform.python_version()} ({sys.platform}, "
             f"{platform.machine()}); one BLAS thread per task. The numbers other documents "
             f"quote are in [`{SUMMARY_FILE}`]({SUMMARY_FILE}), and the claims that failed in "
             f"[`{FINDINGS_FILE}`]({FINDINGS_FILE}), written by the same run. The papers: "
             f"{PAPERS['001']}; {PAPERS['000']}.", "",
             paper_line, "",
             "Each is a figure, theorem or remark of one of the two papers, judged by the "
             "criteria that state the paper's own claim in the paper's setting (✓ held, ✗ did "
             "not, with what it required): *reproduced* when every one holds; *contradicted* "
             "when one fails with its interval on the wrong side of the paper's statement and "
             "the correction shown beside it holds; *not reproduced* otherwise. The library's "
             "variants (its defaults, averaging, corrected bounds) and sanity checks are "
             "reported beside the verdict and never raise it. The PCA paper has no "
             "experiments: its items test its theorems' statements.", "",
             "| experiment | paper | claim | verdict | the paper's criteria held |",
             "|---|---|---|---|---|"]
    for name in order:
        e = entries[name]
        if e["kind"] == PAPER:
            claims = [c for c in e["criteria"] if c["role"] == CLAIM]
            held = (f"{sum(c['held'] for c in claims)} of {len(claims)}" if claims else "--")
            lines.append(f"| [`{name}`](#{name}) | {SHORT.get(e['paper'], e['paper'])} | "
                         f"{_md(e['title'])} | **{e['status']}** | {held} |")
    lines += ["", beyond_line, "",
              "Other data, streams and estimators the papers never ran, their open questions, "
              "and our investigations of paper items. The criteria are ours: the verdict "
              "says how many held, and never *reproduced*.", "",
              "| experiment | paper | what | verdict |", "|---|---|---|---|"]
    for name in order:
        e = entries[name]
        if e["kind"] == BEYOND:
            lines.append(f"| [`{name}`](#{name}) | {SHORT.get(e['paper'], e['paper'])} | "
                         f"{_md(e['title'])} | **{e['status']}** |")
    times = [(n, entries[n].get("task_seconds", 0.0), entries[n].get("task_cpu_seconds"))
             for n in order]
    lines += ["", "Time per experiment (seconds of task time, and of CPU time where recorded, "
              "one BLAS thread a task): " + ", ".join(
                  f"`{n}` {s:.0f}" + ("" if c is None else f" ({c:.0f} CPU)")
                  for n, s, c in times) + "."]
    return "\n".join(lines)


def findings_markdown(summary, order):
    """docs/findings.md: every paper item that was not reproduced or was
    contradicted, with its failed claims (the measured numbers and what was
    required), the evidence against and the corrections that held; the
    reproduced ones listed. Generated from the report's own summary: no
    number here that the report does not state."""
    entries = summary["experiments"]
    paper_line, beyond_line = count_lines(summary["counts"])
    out = ["# What the papers got wrong, and other findings", "",
           f"Generated with [the report](report.md) by its run "
           f"(`{summary['runs'][-1]['command']}`, {summary['preset']} preset); every number "
           "here is a criterion of the report, with its interval.", "",
           paper_line.replace("**", ""), ""]
    for status in ("contradicted", "not reproduced"):
        items = [n for n in order if entries[n]["kind"] == PAPER
                 and entries[n]["status"] == status]
        if not items:
            continue
        out += [f"## {status.capitalize()}", ""]
        for name in items:
            e = entries[name]
            out += [f"### [`{name}`](report.md#{name}) — {_md(e['title'])}", ""]
            for c in e["criteria"]:
                if c["role"] == CLAIM and not c["held"]:
                    out.append(f"- Claim failed: {_mark(c)[2:]}")
            for c in e["criteria"]:
                if c["role"] == CORRECTION:
                    out.append(f"- Correction {'(held)' if c['held'] else '(did not hold)'}: "
                               f"{_md(c['text'])}")
            held = [c for c in e["criteria"] if c["role"] == CLAIM and c["held"]]
            if held:
                out.append("- Held: " + "; ".join(_md(c["text"]) for c in held))
            out.append("")
    repro = [n for n in order if entries[n]["kind"] == PAPER
             and entries[n]["status"] == "reproduced"]
    if repro:
        out += ["## Reproduced", ""] + [f"- [`{n}`](report.md#{n}) — "
                                        f"{_md(entries[n]['title'])}" for n in repro] + [""]
    rest = [n for n in order if entries[n]["kind"] == PAPER
            and entries[n]["status"] in (NOT_RUN, STATUSES[3])]
    if rest:
        out += ["## Not run or not testable here", ""] + [
            f"- [`{n}`](report.md#{n}) — {_md(entries[n].get('skipped') or entries[n].get('untestable') or '')}"
            for n in rest] + [""]
    out += ["## Beyond the papers", "", beyond_line.replace("**", ""), ""]
    for name in order:
        e = entries[name]
        if e["kind"] == BEYOND:
            out.append(f"- [`{name}`](report.md#{name}) — {_md(e['title'])}: **{e['status']}**")
    return "\n".join(out) + "\n"


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


def _summary(entries, order, preset, runs):
    import scipy
    import streamfit

    counts = _counts(entries, order)
    paper_line, beyond_line = count_lines(counts)
    last = runs[-1]
    return _clean({
        "generated": last["generated"], "command": last["command"], "preset": preset,
        "seconds": last["seconds"], "runner": last["runner"], "runs": runs,
        "versions": {"streamfit": streamfit.__version__, "numpy": np.__version__,
                     "scipy": scipy.__version__, "python": platform.python_version(),
                     "platform": f"{sys.platform}-{platform.machine()}"},
        "counts": counts,
        "count_lines": [paper_line.strip("*"), beyond_line.strip("*")],
        "experiments": {name: entries[name] for name in order},
    })
