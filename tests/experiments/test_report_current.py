"""The committed report is current: the cheap experiments, regenerated at the
quick preset, give exactly the verdict lines docs/report.md has. A kernel or
experiment change that moves one of their numbers fails here until the report
is regenerated (``python -m streamfit --out docs --no-progress``)."""
from pathlib import Path

import pytest

from streamfit.experiments import get_experiment, write_report
from streamfit.experiments.report import verdict_line

REPORT = Path(__file__).resolve().parents[2] / "docs" / "report.md"

#: a few seconds of tasks each at the quick preset (the report's "task time"),
#: over both papers: the quantile kernels' paths and schedule (qr-fig2,
#: qr-fig4, qr-phase-one), batch updates and the regret accounting (qr-thm7),
#: the GOE sampler and the eigensolvers (pca-goe)
CHEAP = ("qr-fig2", "qr-fig4", "qr-phase-one", "qr-thm7", "pca-goe")


@pytest.mark.skipif(not REPORT.exists(), reason="docs/report.md is not in this checkout")
def test_cheap_experiments_match_the_committed_report(tmp_path):
    committed = REPORT.read_text(encoding="utf-8")
    outcomes = write_report([get_experiment(name) for name in CHEAP], preset="quick",
                            out=str(tmp_path), progress=False)
    lines = committed.splitlines()
    stale = []
    for name in CHEAP:
        line = verdict_line(outcomes[name])
        if line not in lines:
            head = lines.index(f'<a id="{name}"></a>') if f'<a id="{name}"></a>' in lines else 0
            old = next((x for x in lines[head:] if x.startswith("**Verdict")), "(none)")
            stale.append(f"{name}:\n  committed: {old}\n  now:       {line}")
    assert not stale, ("docs/report.md is stale; regenerate it with `python -m streamfit "
                       "--out docs --no-progress`.\n" + "\n".join(stale))
