"""The qr-sparse experiment at small sizes: its stream is the stated one, the
statistical schedule on sparse rows that span few columns keeps the paper's
behaviour and beats the best constant step, and the verdict's criteria are
computed from the paths (a schedule that stalls fails them)."""
import numpy as np
import pytest

from streamfit.experiments import get_experiment
from streamfit.experiments._qr_common import noise_facts
from streamfit.experiments._stats import last_decade_slope
from streamfit.experiments.qr_sparse import CONSTANTS, run_sparse, sparse_stream


def test_sparse_stream_is_the_stated_one():
    X, y, beta = sparse_stream(5_000, nnz=8, p=40, s=4, snr=20.0, seed=1, width=2 ** 16)
    assert X.shape == (5_000, 2 ** 16) and X.format == "csr"
    assert np.all(np.diff(X.indptr) == 8)                    # nnz a row, distinct columns
    assert np.unique(X.indices).size == 40                    # the vocabulary
    assert np.all(np.diff(X.indices.reshape(-1, 8), axis=1) > 0)
    support = np.flatnonzero(beta)
    assert support.size == 4 and np.isin(support, X.indices).all()
    assert np.linalg.norm(beta) == pytest.approx(20.0 * noise_facts()[0])
    # t_1.1 noise with zero median
    assert abs(np.median(y - X @ beta)) < 0.1
    with pytest.raises(ValueError, match="nnz <= p"):
        sparse_stream(10, nnz=8, p=4, s=2, snr=1.0, seed=0)


def test_schedule_beats_the_best_constant_when_rows_span_few_columns():
    # p = nnz: sparse storage, dense in disguise (the paper's setting, d = nnz).
    # Measured over seeds 0-5: constant / statistical 1.6-4.5, slopes -0.42..-0.70
    runs = [run_sparse(20_000, 10, 10, 5, 20.0, 12, seed) for seed in range(4)]
    ratio = [min(c[-1] for c in r["constant"]) / r["statistical"][-1] for r in runs]
    slopes = [last_decade_slope(np.asarray(r["t"], float), r["statistical"]) for r in runs]
    assert min(ratio) > 1.0 and np.median(ratio) > 1.5, ratio
    assert -0.8 < np.median(slopes) < -0.35, slopes
    assert all(len(r["constant"]) == len(CONSTANTS) for r in runs)
    assert all(max(r["phase"]) == 2 for r in runs)            # phase two reached


def _fake(p, stat, const_final, switch_err, reps=6):
    """Results of one panel: the statistical path ``stat`` over t, every
    constant flat at const_final, the switch at t = 100 with error switch_err."""
    t = np.geomspace(10, 100_000, 25).astype(int)
    phase = np.where(t >= 100, 2.0, 1.0)
    path = np.array(stat(t), float)
    path[np.flatnonzero(t >= 100)[0]] = switch_err
    return [{"t": t.tolist(), "statistical": path.tolist(), "phase": phase.tolist(),
             "constant": [[const_final] * t.size for _ in CONSTANTS],
             "beta_norm": 1.0} for _ in range(reps)]


def test_verdict_is_computed_from_the_paths():
    exp = get_experiment("qr-sparse")
    prm = exp.params("tiny", spans=(10, 40), reps=6)
    good = _fake(10, lambda t: 0.03 * (t / 100.0) ** -0.5, 0.01, 0.02)  # beats 0.01, 1/t
    stall = _fake(40, lambda t: np.full(t.size, 0.9), 0.01, 0.9)          # stalls at 0.9
    out = exp.analyse(prm, good + stall)
    held = [c.passed for c in out.checks]
    assert len(held) == 6
    assert held[:3] == [True, True, True] and held[3:] == [False, False, False]
    assert out.figures and out.tables
    assert out.summary["p10_best_constant_over_statistical"] > 1.2
    assert out.summary["p40_best_constant_over_statistical"] < 0.1
