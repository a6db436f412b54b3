"""The qr-coverage experiment through its own task and analysis functions:
the counters it reads are the estimator's, and at the quick preset's size
its three criteria hold (fixed seeds)."""
import numpy as np

from streamfit import OnlineIntervalRegressor
from streamfit.experiments import get_experiment
from streamfit.experiments.qr_coverage import STREAMS, make_coverage_stream, run_coverage


def test_streams_are_what_they_say():
    X, y = make_coverage_stream("shift", 40_000, random_state=0)
    base, _ = make_coverage_stream("stationary", 40_000, random_state=0)
    assert np.array_equal(X, base)
    jump = np.median(y[20_000:] - X[20_000:] @ np.linalg.lstsq(X, y, rcond=None)[0]) - \
        np.median(y[:20_000] - X[:20_000] @ np.linalg.lstsq(X, y, rcond=None)[0])
    assert 4.5 < jump < 5.5
    _, y = make_coverage_stream("hetero", 40_000, random_state=0)
    r = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
    iqr = [np.subtract(*np.percentile(r[a:a + 4000], [75, 25])) for a in (0, 36_000)]
    assert 3.5 < iqr[1] / iqr[0] < 6


def test_run_coverage_reads_the_estimators_counters():
    res = run_coverage("hetero", 6_000, 3, 5)
    X, y = make_coverage_stream("hetero", 6_000, random_state=5)
    for method in ("aci", "pid"):
        est = OnlineIntervalRegressor(method=method).fit(X, y)
        n_cov, wsum, nb, n_base, bw = res[method][-1]
        assert n_cov / 6_000 == est.coverage_
        assert wsum / nb == est.interval_width_
        assert n_base / 6_000 == est.quantile_coverage_
        assert bw / 6_000 == est.quantile_width_


def test_quick_preset_criteria_hold():
    exp = get_experiment("qr-coverage")
    p = exp.params("quick", reps=3)
    outcome = exp.analyse(p, [t.func(**t.setting, seed=t.seed) for t in exp.tasks(p)])
    assert [c.passed for c in outcome.checks] == [True, True, True], outcome.checks
    assert len(outcome.tables[0][1]["stream"]) == 3 * len(STREAMS)
    assert "qr_coverage" in outcome.figures
