"""The quantile regression paper's claims at small sizes, through the
experiments' own task functions (fixed seeds, margins a correct library
passes every time and a broken one fails)."""
import numpy as np
import pytest

from streamfit.experiments._qr_common import PaperBatchSchedule, PaperSchedule, noise_facts
from streamfit.experiments.qr_batch_regret import run_theorem7
from streamfit.experiments.qr_efficiency import rm_factor, run_efficiency
from streamfit.experiments.qr_phase_one import (max_contraction_rate, mixed_sparsity,
                                                run_phase_one, stall_factor)
from streamfit.experiments.qr_remark3 import run_remark3
from streamfit.experiments.qr_stepsizes import run_figure4


@pytest.mark.parametrize("snr", [20.0, 200.0])
def test_figure4_statistical_beats_constant_beats_inverse_time(snr):
    runs = [run_figure4(50_000, 50, snr, 0.5, 6, seed) for seed in (0, 1)]
    stat = np.median([r["statistical"][-1] for r in runs])
    best = lambda key: np.min(np.median([[r[key][j][-1] for r in runs]  # noqa: E731
                                         for j in range(len(runs[0][key]))], axis=1))
    const, inv = best("constant"), best("inverse_time")
    # measured: 2.7x and 12x (constant / statistical), 60x+ (1/t / constant)
    assert const > 1.5 * stat
    assert inv > 5 * const


def test_remark3_small_ca_wins_short_term_loses_long_term():
    # ||beta_0 - beta*|| = 0.02 E|xi| (Figure 2b), d = 20 so the long term fits in 50,000
    runs = [run_remark3(50_000, 20, 0.02, (0.02, 20.0), 30.0, 15, seed) for seed in (0, 1)]
    t = np.asarray(runs[0]["t"])
    small = np.median([r[0.02] for r in runs], axis=0)
    large = np.median([r[20.0] for r in runs], axis=0)
    early = t <= 500
    assert np.all(small[early] < large[early] / 1.5)      # the large Ca overshoots first
    assert small[-1] > 1.3 * large[-1]                     # ... and wins in the end


def test_theorem7_batch_regret_below_single():
    single = run_theorem7(20_000, 20, 20.0, 0.5, 1, 10, 0)
    for bs in (50, 200):
        batch = run_theorem7(20_000, 20, 20.0, 0.5, bs, 10, 0)
        per_update = np.asarray(batch["regret"]) / bs
        at = np.interp(batch["t"], single["t"], single["regret"])
        assert np.all(per_update < 0.2 * at)
        # regret against beta* ends positive: the iterates are not beta*
        assert per_update[-1] > 0


def test_phase_one_stalls_at_decay_half_and_not_at_decay_fifth():
    gamma, b0 = noise_facts(0.5)

    def at_switch(variant):
        r = run_phase_one(20_000, 20, 200.0, variant, 40, 0)
        i = int(np.flatnonzero(np.asarray(r["phase"]) >= 2)[0])
        return r["err"][i] * r["beta_norm"] / gamma, r["b0"][i] / b0

    err, b0_ratio = at_switch("default")           # the paper's 0.5/d
    assert err > 5 and b0_ratio > 20               # measured ~31 E|xi|, b0 ~360x
    err, b0_ratio = at_switch("decay 0.2")
    assert err < 1 and b0_ratio < 2                 # measured 0.16 E|xi|, b0 1.1x


def test_drift_model_of_phase_one():
    # the largest contraction rate at the median is 1/pi: 0.5 exceeds it, 0.2 does not
    assert max_contraction_rate(0.5) == pytest.approx(1 / np.pi)
    assert 0.05 < stall_factor(0.5) < 0.3
    assert stall_factor(0.2) < 1e-3
    # the sparsity of noise plus a Gaussian error: 1/f(0) at no error, ~sqrt(2 pi) err far
    assert mixed_sparsity(0.0) == pytest.approx(noise_facts(0.5)[1])
    assert mixed_sparsity(1000.0) / 1000.0 == pytest.approx(np.sqrt(2 * np.pi), rel=0.02)


def test_plain_iterate_follows_robbins_monro_and_averaging_fixes_it():
    runs = [run_efficiency(20_000, 10, 0.5, 20.0, (1.0, 20.0), 0.2, seed) for seed in range(3)]
    off = np.median([r["offline"] for r in runs])
    plain1, plain20 = (np.median([r["plain"][i] for r in runs]) / off for i in (0, 1))
    avg20 = np.median([r["avg"][1] for r in runs]) / off
    assert rm_factor(20.0) == pytest.approx(np.sqrt(400 / 39))
    assert 0.75 * rm_factor(20.0) < plain20 < 1.35 * rm_factor(20.0)   # measured 3.67 vs 3.20
    assert plain1 < 1.3 and avg20 < 1.4                                 # measured 1.02, 1.18


def test_paper_schedules_are_continuous_where_the_paper_says():
    s = PaperSchedule(eta0=2.0, decay=0.5, d=100, Ca=20, Cb=30, b0=3.0)
    t1 = s.switch_time()
    eta = s.stepsizes(0, t1 + 3)
    assert np.all(np.diff(eta[:t1]) < 0)
    assert eta[t1] == pytest.approx(3.0 * 20 / (1 + 3000))
    assert eta[t1 - 1] >= eta[t1] > 0.99 * eta[t1 - 1] * (1 - 0.5 / 100)
    # Cb = 0 from the first phase-two step: finite
    assert np.isfinite(PaperSchedule(Cb=0.0, t1=0).stepsizes(0, 5)).all()
    b = PaperBatchSchedule(eta0=100.0, decay=0.1, eta_const=1.5, n2=4, Ca=20, Cb=30, b0=3.0)
    t1, t2 = b.switch_times()
    eta = b.stepsizes(0, t2 + 2)
    assert np.all(eta[t1:t2] == 1.5) and eta[t2] == pytest.approx(3.0 * 20 / 30)
    b.t1 = 2                                    # an oracle switch moves both phases
    assert b.switch_times() == (2, 6)
