"""What an experiment is, what it returns, and how its verdict is judged."""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Experiment", "Outcome", "Check", "judge", "PAPER", "BEYOND"]

#: What an experiment checks: a claim one of the papers makes (a figure, a
#: theorem's statement, a remark), or something beyond them -- other data,
#: streams and estimators the papers never ran, open questions, our own
#: investigations of a paper item. Only paper items can be "reproduced".
PAPER, BEYOND = "paper", "beyond"
KINDS = (PAPER, BEYOND)

#: verdicts of paper items: every criterion held, some did, none did
STATUSES = ("reproduced", "partly", "not reproduced")
#: the grade of a beyond-paper measurement, by the same rule
GRADES = ("all held", "some held", "none held")
MEASURED = "measured"
NOT_RUN = "not run"


@dataclass
class Check:
    """One stated criterion, the measured numbers in ``text``, and whether it held."""

    text: str
    passed: bool

    def __post_init__(self):
        # numpy comparisons give np.bool_; NaN-based criteria must read as failed
        self.passed = bool(self.passed)


@dataclass
class Outcome:
    """An experiment's result: our setting (differences from the paper stated),
    tables (caption, dict of equal-length columns), figures (file stem ->
    matplotlib Figure), the checks the verdict is judged from, and notes;
    ``skipped`` says why it did not run (a missing optional package)."""

    setting: str
    tables: list = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    checks: list = field(default_factory=list)
    notes: str = ""
    skipped: str = ""
    #: headline numbers other documents quote (name -> number or string),
    #: written to the report's summary JSON beside report.md
    summary: dict = field(default_factory=dict)
    #: PAPER or BEYOND; the report sets it from the experiment
    kind: str = PAPER

    @property
    def grade(self):
        """0: every criterion held, 1: some, 2: none (or no criteria)."""
        return STATUSES.index(judge(self.checks))

    @property
    def status(self):
        """'reproduced' / 'partly' / 'not reproduced' for a paper item;
        'measured: ...' with the criteria held for a beyond-paper item."""
        if self.skipped:
            return NOT_RUN
        if self.kind == PAPER:
            return judge(self.checks)
        n, held = len(self.checks), sum(c.passed for c in self.checks)
        if n == 1:
            return f"{MEASURED}: its criterion {'held' if held else 'did not hold'}"
        if held == n:
            return f"{MEASURED}: all {n} criteria held"
        if held == 0:
            return f"{MEASURED}: none of {n} criteria held"
        return f"{MEASURED}: {held} of {n} criteria held"

    @property
    def verdict(self):
        if self.skipped:
            return f"{NOT_RUN} -- {self.skipped}"
        marks = "; ".join(("[ok] " if c.passed else "[no] ") + c.text for c in self.checks)
        return f"{self.status} -- {marks}"


def judge(checks):
    """'reproduced' if every check passed, 'not reproduced' if none did, else
    'partly' (no checks: 'not reproduced')."""
    passed = [bool(c.passed) for c in checks]
    if passed and all(passed):
        return STATUSES[0]
    if any(passed):
        return STATUSES[1]
    return STATUSES[2]


@dataclass
class Experiment:
    """One experiment of the report.

    ``kind`` is PAPER for a claim the papers make, BEYOND for anything else
    (its verdict says "measured", never "reproduced").
    ``tasks(params)`` lists the :class:`~streamfit.experiments._runner.Task`
    objects to run (replications and grid points, each a pure function of
    setting and seed); ``analyse(params, results)`` turns their results, in
    task order, into an :class:`Outcome`. ``presets`` maps "quick" and "full"
    to the parameters; ``claim`` is the paper's setting and claim (Markdown).
    """

    name: str
    paper: str
    title: str
    claim: str
    presets: dict
    tasks: object
    analyse: object
    kind: str = PAPER

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind must be one of {KINDS}, got {self.kind!r}")

    def params(self, preset="quick", **overrides):
        if preset not in self.presets:
            raise ValueError(f"preset must be one of {sorted(self.presets)}, got {preset!r}")
        out = dict(self.presets[preset])
        unknown = set(overrides) - set(out)
        if unknown:
            raise ValueError(f"{self.name}: unknown parameter(s) {sorted(unknown)}; "
                             f"known: {sorted(out)}")
        out.update(overrides)
        return out
