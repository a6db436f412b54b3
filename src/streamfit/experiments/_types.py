"""What an experiment is, what it returns, and how its verdict is judged.

A paper item's verdict is decided by the paper's own words alone: each
criterion says what it checks (its ``role``):

- ``CLAIM``: a claim the paper makes, tested in the paper's setting (its
  constants, its schedule, its estimator);
- ``CORRECTION``: where a claim fails, the corrected statement, checked beside
  it (the verdict is *contradicted* only when such a correction holds);
- ``VARIANT``: the library's own variants (its defaults, averaging, corrected
  bounds) and ``SANITY`` checks: reported beside the verdict, never raising it.

Verdicts of paper items: *reproduced* (every claim criterion held), *not
reproduced* (one did not), *contradicted* (one failed with the measurement's
interval on the wrong side of the paper's statement, and the correction shown
beside it held), *not testable here* (with the reason), or *not run* (an
optional input missing, with how to supply it). Beyond-paper measurements are
graded by how many of their criteria held, and never "reproduced".
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Experiment", "Outcome", "Check", "judge", "PAPER", "BEYOND", "CLAIM",
           "CORRECTION", "VARIANT", "SANITY"]

#: What an experiment checks: a claim one of the papers makes (a figure, a
#: theorem's statement, a remark), or something beyond them -- other data,
#: streams and estimators the papers never ran, open questions, our own
#: investigations of a paper item. Only paper items can be "reproduced".
PAPER, BEYOND = "paper", "beyond"
KINDS = (PAPER, BEYOND)

#: the roles of a criterion (see the module docstring)
CLAIM, CORRECTION, VARIANT, SANITY = "claim", "correction", "variant", "sanity"
ROLES = (CLAIM, CORRECTION, VARIANT, SANITY)

#: verdicts of paper items, by the paper's own words
STATUSES = ("reproduced", "contradicted", "not reproduced", "not testable here")
#: the grade of a beyond-paper measurement
GRADES = ("all held", "some held", "none held")
MEASURED = "measured"
NOT_RUN = "not run"


@dataclass
class Check:
    """One stated criterion, the measured numbers in ``text``, and whether it
    held. ``role``: what it checks (CLAIM, CORRECTION, VARIANT, SANITY);
    ``requires``: what it required, in words a reader can hold the numbers
    against (shown beside a failed criterion, e.g. "the whole 95% interval
    inside [0.3, 0.7]"); ``against``: the measurement is evidence against the
    statement (its interval lies on the wrong side), not merely short of
    confirming it."""

    text: str
    passed: bool
    role: str = CLAIM
    requires: str = ""
    against: bool = False

    def __post_init__(self):
        # numpy comparisons give np.bool_; NaN-based criteria must read as failed
        self.passed = bool(self.passed)
        self.against = bool(self.against) and not self.passed
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")


@dataclass
class Outcome:
    """An experiment's result: our setting (differences from the paper stated),
    tables (caption, dict of equal-length columns), figures (file stem ->
    matplotlib Figure), the checks the verdict is judged from, and notes;
    ``skipped`` says why it did not run (a missing optional package or input,
    and how to supply it); ``untestable`` why the claim cannot be tested
    here (the verdict is then "not testable here")."""

    setting: str
    tables: list = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    checks: list = field(default_factory=list)
    notes: str = ""
    skipped: str = ""
    untestable: str = ""
    #: headline numbers other documents quote (name -> number or string),
    #: written to the report's summary JSON beside report.md
    summary: dict = field(default_factory=dict)
    #: PAPER or BEYOND; the report sets it from the experiment
    kind: str = PAPER

    @property
    def claims(self):
        """The criteria that state the paper's own claim."""
        return [c for c in self.checks if c.role == CLAIM]

    @property
    def status(self):
        """A paper item's verdict (see the module docstring); 'measured: ...'
        with the criteria held for a beyond-paper item; 'not run'."""
        if self.skipped:
            return NOT_RUN
        if self.untestable:
            return STATUSES[3]
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
    def grade(self):
        """A measurement's grade: 0 every criterion held, 1 some, 2 none."""
        held = [c.passed for c in self.checks]
        return 0 if held and all(held) else (1 if any(held) else 2)

    @property
    def verdict(self):
        """The status and every criterion, marked, as one line of text."""
        if self.skipped:
            return f"{NOT_RUN} -- {self.skipped}"
        if self.untestable:
            return f"{STATUSES[3]} -- {self.untestable}"
        marks = "; ".join(("[ok] " if c.passed else "[no] ") + c.text for c in self.checks)
        return f"{self.status} -- {marks}"


def judge(checks):
    """A paper item's verdict from its criteria: 'reproduced' if every CLAIM
    criterion held; 'contradicted' if one failed with the evidence against it
    and every CORRECTION criterion (there must be one) held; else 'not
    reproduced'. VARIANT and SANITY criteria never change it. A paper item
    without a claim criterion is an error of the experiment."""
    claims = [c for c in checks if c.role == CLAIM]
    if not claims:
        raise ValueError("a paper item needs at least one criterion with role CLAIM")
    if all(c.passed for c in claims):
        return STATUSES[0]
    corrections = [c for c in checks if c.role == CORRECTION]
    if corrections and all(c.passed for c in corrections) and \
            any(c.against for c in claims if not c.passed):
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
    to the parameters; ``claim`` is the paper's setting and claim (Markdown),
    in the paper's words where they can be quoted.
    """

    name: str
    paper: str
    title: str
    claim: str
    presets: dict
    tasks: object
    analyse: object
    kind: str = PAPER
    #: timed alone: its tasks run in the main process after every other
    #: experiment's have finished (a measurement of time, not of statistics)
    solo: bool = False

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
