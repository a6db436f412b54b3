"""The quantile paper's Section 5 low-rank extension at small sizes, through the
experiment's own task function (fixed seeds, margins a correct library
passes every time and a broken one fails)."""
import numpy as np
import pytest

from streamfit.experiments._stats import last_decade_slope
from streamfit.experiments.lowrank import EXPERIMENT, low_rank_truth, run_lowrank


@pytest.mark.parametrize("sensing", ["gaussian", "completion"])
def test_error_falls_like_sqrt_deff_over_t_and_beats_least_squares_under_t11(sensing):
    r = run_lowrank(10, 2, sensing, 1000, 5.0, 12, False, 0)
    # t_1.1 noise (the same sensing stream also carries the Gaussian-noise runs)
    t = np.asarray(r["t"])
    qr, ls = np.asarray(r["t_noise"]["low-rank QR"]), r["t_noise"]["low-rank least squares"]
    # one replication's last-decade slope: measured -0.46 to -0.85 over seeds 0-4; a
    # stalled run (0) or one still in the 1/t transient of phase two (-1) is outside
    assert -0.9 <= last_decade_slope(t, qr) <= -0.3
    # err sqrt(t / d_eff) ~ 1 at SNR 5 (measured 0.69-1.2 over seeds 0-4, d = 10 and 20)
    assert 0.3 < qr[-1] * np.sqrt(t[-1] / r["deff"]) < 3
    # least squares does not converge under t_1.1 noise (measured 6x-125x)
    assert ls[-1] > 3 * qr[-1]


def test_truth_has_the_rank_and_scale_asked():
    M = low_rank_truth(15, 3, np.random.default_rng(0))
    s = np.linalg.svd(M, compute_uv=False)
    assert np.linalg.norm(M) == pytest.approx(1.0)
    assert s[2] > 0.3 and s[3] < 1e-12 and s[0] / s[2] == pytest.approx(2.0)


def test_presets_keep_the_quick_run_small():
    # dense samples' entries per replication: the small sizes run in seconds;
    # the quick preset adds the d1 = d2 = 100, r = 5 (~1e10 entries,
    # minutes) once, at one replication
    for preset in ("tiny", "quick"):
        p = EXPERIMENT.params(preset)
        small = [(d, r) for d, r in p["sizes"] if d < 100]
        work = sum(p["t_factor"] * r * (2 * d - r) * d * d for d, r in small)
        assert work < 5e7
    quick = EXPERIMENT.params("quick")
    assert max(quick["sizes"]) == (100, 5) and quick["big_reps"] == 1
    assert quick["t_factor"] * 5 * 195 * 100 * 100 < 1e10
