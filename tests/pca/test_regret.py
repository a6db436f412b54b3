"""Regret claims of the PCA paper, with fixed seeds and margins a correct
implementation passes and a broken one (no noise, wrong sigma, wrong gain) fails."""
import numpy as np
import pytest

from streamfit import FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA, PerturbedLeaderPCA
from streamfit.experiments import adversarial_regret, comparator_regret, loglog_slope
from streamfit.pca import auto_sigma, goe_matrix, regret_bound
from streamfit.simulate import make_dense_stream, make_ftl_adversary, make_spiked_stream

CHECKPOINTS = (1000, 3000, 10_000, 30_000, 100_000)


@pytest.fixture(scope="module")
def adversarial():
    # n = 10, k = 2, T = 1e3..1e5, 4 seeds: ~15 s
    return adversarial_regret(10, 2, CHECKPOINTS, seeds=(0, 1, 2, 3))


@pytest.mark.slow
def test_ftl_regret_is_linear_on_the_adversarial_sequence(adversarial):
    # k T / n = 0.2 T, less the preamble's gains
    slope = adversarial["slope_ftl"][0]
    print(f"FTL log-log slope {slope:.3f}")
    assert 0.97 < slope < 1.03
    for T, r in zip(adversarial["T"], adversarial["ftl_regret"]):
        assert 0.2 * T - 10 <= r <= 0.2 * T


@pytest.mark.slow
def test_fpl_regret_grows_like_sqrt_t_and_stays_below_the_bound(adversarial):
    slope = adversarial["slope_fpl"][0]
    print(f"FPL log-log slope {slope:.3f}, regret/bound {adversarial['fpl/bound']}")
    # observed 0.50; sqrt(T) growth, far from FTL's 1 and from a constant
    assert 0.4 < slope < 0.6
    for r, b in zip(adversarial["fpl_regret_mean"], adversarial["bound"]):
        # observed ~0.1 of the bound; a sigma 10x off either way breaks 0.5
        assert 0 < r < 0.5 * b


def test_bound_and_auto_sigma_formulas():
    # the bound R <= a sqrt(T) / sigma + sqrt(2) k sqrt(n T) sigma (the paper's
    # noise term times sqrt(2), see test_goe_top_eigenvalue_constant)
    n, k = 100, 4
    s = auto_sigma(n, k)
    # a = sqrt(2/pi), b = sqrt(2) k sqrt(n): sigma^2 = a / b = 1 / (k sqrt(pi n))
    assert s ** 2 == pytest.approx(1 / (k * np.sqrt(np.pi * n)))
    # the auto sigma minimises the bound: 2 sqrt(a b T) = 2 (4/pi)^{1/4} sqrt(k) n^{1/4} sqrt(T)
    T = 1e4
    best = regret_bound(T, n, k, s)
    assert best == pytest.approx(2 * (4 / np.pi) ** 0.25 * np.sqrt(k) * n ** 0.25 * np.sqrt(T))
    assert best < regret_bound(T, n, k, 1.1 * s) and best < regret_bound(T, n, k, s / 1.1)
    # the noise term alone: the bound's increase with sigma is sqrt(2) k sqrt(n T) per unit
    big = 1e6 * s
    assert regret_bound(T, n, k, 2 * big) - regret_bound(T, n, k, big) == pytest.approx(
        np.sqrt(2) * k * np.sqrt(n * T) * big, rel=1e-9)
    # dense, eigenvalues <= 1 and tr(X^2) <= n: a = k sqrt(2n/pi), so
    # sigma^2 = 1 / sqrt(pi), R = 2 (4/pi)^{1/4} k sqrt(nT)
    sd = auto_sigma(n, k, instances="dense")
    assert sd ** 2 == pytest.approx(1 / np.sqrt(np.pi))
    assert regret_bound(T, n, k, sd, instances="dense") == pytest.approx(
        2 * (4 / np.pi) ** 0.25 * k * np.sqrt(n * T))
    # scaling the data by c scales sigma by c (vector: ||x||^2 <= c)
    assert auto_sigma(n, k, scale=3.0) == pytest.approx(3.0 * s)


@pytest.mark.parametrize("n, reps", [(10, 200), (100, 60), (300, 30)])
def test_goe_top_eigenvalue_constant(n, reps):
    """The bound's noise term rests on E lambda_1(N) <= c sigma sqrt(n) for the
    noise FPL draws (goe_matrix: N = (G + G^T)/2, G_ij ~ N(0, sigma^2)). The
    paper's c = 1 fails (lambda_1 -> sqrt(2) sigma sqrt(n), the semicircle
    edge); c = sqrt(2) holds at every n (Sudakov-Fernique), and so does
    E lambda_{1:k}(N) <= sqrt(2) k sigma sqrt(n). Measured over fixed seeds
    (means 1.18, 1.36, 1.39 at n = 10, 100, 300; standard errors 0.014,
    0.006, 0.003): 5 standard errors on either side. A noise of the wrong
    scale (off-diagonal variance sigma^2, not sigma^2 / 2) fails the upper
    check by far."""
    sigma, k = 0.5, 4
    lam = np.array([np.linalg.eigvalsh(goe_matrix(n, sigma, random_state=seed))[-k:]
                    for seed in range(reps)])
    r1 = lam[:, -1] / (sigma * np.sqrt(n))
    rk = lam.sum(axis=1) / (k * sigma * np.sqrt(n))
    m1, se1 = r1.mean(), r1.std(ddof=1) / np.sqrt(reps)
    mk, sek = rk.mean(), rk.std(ddof=1) / np.sqrt(reps)
    assert m1 - 5 * se1 > 1.0, (m1, se1)                 # the paper's constant fails
    assert m1 + 5 * se1 < np.sqrt(2), (m1, se1)          # the corrected one holds
    assert mk + 5 * sek < np.sqrt(2), (mk, sek)


def test_auto_sigma_follows_the_data_scale():
    X = make_spiked_stream(50, 30, n_spikes=2, random_state=0)
    est = PerturbedLeaderPCA(2, random_state=0).partial_fit(3.0 * X)   # ||x||^2 = 9
    assert est.sigma_ == pytest.approx(9.0 * auto_sigma(30, 2))
    Xs = make_dense_stream(20, 12, random_state=0)
    est = PerturbedLeaderPCA(2, random_state=0).partial_fit_dense(Xs)
    spec = np.minimum(np.sqrt(np.einsum("tij,tij->t", Xs, Xs)), np.abs(Xs).sum(axis=2).max(axis=1))
    trsq = np.einsum("tij,tij->t", Xs, Xs).max()
    assert est.sigma_ == pytest.approx(auto_sigma(12, 2, instances="dense", scale=spec.max(),
                                                  max_trace_sq=trsq))


def test_fpl_beats_ftl_on_the_adversary_and_ftl_wins_on_iid_data():
    X = make_ftl_adversary(5000, 8, 2)
    ftl = FollowTheLeaderPCA(2).partial_fit(X).regret_
    fpl = np.mean([PerturbedLeaderPCA(2, random_state=s).partial_fit(X).regret_
                   for s in range(3)])
    assert fpl < 0.2 * ftl
    # i.i.d. spiked data: the leader is the right answer and FPL pays for noise
    X = make_spiked_stream(3000, 40, n_spikes=3, random_state=1)
    ftl = FollowTheLeaderPCA(3).partial_fit(X).regret_
    fpl = PerturbedLeaderPCA(3, random_state=0).partial_fit(X).regret_
    assert ftl < fpl < regret_bound(3000, 40, 3, auto_sigma(40, 3))


@pytest.mark.parametrize("noise", ["fixed", "random_walk", "independent"])
def test_every_noise_process_has_sublinear_regret(noise):
    X = make_ftl_adversary(20_000, 10, 2)
    r = [PerturbedLeaderPCA(2, noise=noise, random_state=s).partial_fit(X[:T]).regret_
         for s in range(3) for T in (2000, 20_000)]
    r = np.array(r).reshape(3, 2).mean(axis=0)
    slope = loglog_slope([2000, 20_000], r)
    # sqrt(T) growth (observed 0.4-0.55); FTL would be 1.0
    assert slope < 0.7, slope
    assert r[1] < 0.5 * regret_bound(20_000, 10, 2, auto_sigma(10, 2))


def test_dense_regret_below_the_dense_bound():
    Xs = make_dense_stream(2000, 20, random_state=3)
    est = PerturbedLeaderPCA(3, random_state=0).partial_fit_dense(Xs, check_psd=False)
    spec = np.linalg.eigvalsh(Xs)[:, -1].max()
    trsq = np.einsum("tij,tij->t", Xs, Xs).max()
    bound = regret_bound(2000, 20, 3, est.sigma_, instances="dense", scale=spec,
                         max_trace_sq=trsq)
    assert 0 < est.regret_ < 0.5 * bound


# --- the comparators over the capped simplex ------------------------------------

@pytest.mark.parametrize("Est", [MatrixEGPCA, MatrixGDPCA])
def test_comparators_regret_grows_like_sqrt_t_within_their_bound_on_the_adversary(Est):
    # deterministic: the expected regret does not depend on the sampling seed.
    # Observed slopes 0.515 (MEG and GD), regret/bound 0.02 and 0.6. The
    # cyclic adversary is balanced, so a learner stuck at W = (k/n) I would
    # also do well here: the spiked test below catches that one.
    X = make_ftl_adversary(CHECKPOINTS[-1], 10, 2)
    est, prev, regret = Est(2, random_state=0), 0, []
    for T in CHECKPOINTS:
        est.partial_fit(X[prev:T])
        prev = T
        regret.append(est.regret_)
        assert 0 < est.regret_ <= est.regret_bound(), (T, est.regret_, est.regret_bound())
    slope = loglog_slope(CHECKPOINTS, regret)
    assert 0.4 < slope < 0.65, slope


@pytest.mark.parametrize("Est", [MatrixEGPCA, MatrixGDPCA])
def test_comparators_with_a_fixed_tuned_eta_stay_within_the_tuned_bound(Est):
    T, n, k = 10_000, 10, 2
    X = make_ftl_adversary(T, n, k)
    # the rates that minimise each bound for this T (unit-norm rows)
    eta = np.sqrt(k * np.log(n / k) / T) if Est is MatrixEGPCA else np.sqrt(2 * k / T)
    est = Est(k, eta=eta).partial_fit(X)
    tuned = (2 * np.sqrt(k * np.log(n / k) * T) if Est is MatrixEGPCA
             else np.sqrt(2 * k) * np.sqrt(T))
    assert est.regret_bound() == pytest.approx(tuned)
    assert 0 < est.regret_ <= tuned


@pytest.mark.parametrize("Est", [MatrixEGPCA, MatrixGDPCA])
def test_comparators_learn_a_spiked_stream_within_their_bound(Est):
    # W = (k/n) I forever would lose ~1000 here; MEG (restarting at powers of
    # two) is observed at ~385, GD at ~105, both with per-trial regret falling
    for seed in (0, 1):
        X = make_spiked_stream(4000, 50, n_spikes=3, random_state=seed)
        est = Est(3, random_state=seed).partial_fit(X[:500])
        early = est.regret_ / 500
        est.partial_fit(X[500:])
        uniform = est.best_gain_ - 3 / 50 * np.trace(est.cumulative_matrix())
        assert 0 < est.regret_ <= est.regret_bound()
        assert est.regret_ < 0.5 * uniform
        assert est.regret_ / 4000 < 0.6 * early


@pytest.mark.parametrize("Est", [MatrixEGPCA, MatrixGDPCA])
def test_comparators_dense_regret_within_their_bound(Est):
    Xs = make_dense_stream(2000, 20, random_state=3)
    est = Est(3, random_state=0).partial_fit_dense(Xs, check_psd=False)
    uniform = est.best_gain_ - 3 / 20 * np.trace(est.cumulative_matrix())
    # observed: MEG 255 and GD 15 against bounds 639 and 118, uniform 751
    assert 0 < est.regret_ <= est.regret_bound()
    assert est.regret_ < 0.5 * uniform


def test_four_algorithm_table_is_consistent():
    t = comparator_regret(seeds=(0, 1), adversarial=(10, 2, (500, 2000, 8000)),
                          spiked=(30, 2, (300, 1200)))
    rows = len(t["T"])
    assert rows == 5 and all(len(v) == rows for v in t.values())
    for i in range(rows):
        for name in ("fpl", "meg", "gd"):
            value = t["fpl_mean"][i] if name == "fpl" else t[name][i]
            assert 0 < value <= t[f"{name}_bound"][i], (name, i)
    adversarial = [i for i in range(rows) if t["stream"][i].startswith("adversarial")]
    # on the adversary FTL's regret is linear and every other algorithm's falls
    # ever further below it (GD is the closest: 36 against 99 at T = 500)
    for i, factor in zip(adversarial, (2, 3, 5)):
        assert t["ftl"][i] > factor * max(t["fpl_mean"][i], t["meg"][i], t["gd"][i])
