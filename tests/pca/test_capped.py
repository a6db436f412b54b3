"""Matrix Exponentiated Gradient and matrix Gradient Descent over the capped
simplex (MatrixEGPCA, MatrixGDPCA) and their building blocks: the two Bregman
projections against a bisection reference and a variational check, the
Warmuth-Kuzmin mixture decomposition, the systematic sampler; the invariants
of W over long runs; both algorithms against a NumPy reference (vector and
dense instances, fixed and "auto" eta); capping and projections actually
reached; the sampled (realized) gain as an unbiased estimate of the expected
gain; and the estimator contract of DESIGN.md where it is particular to this
family, as test_contract.py checks it for the FPL estimators (the stream
contract every estimator shares is streamfit.utils.estimator_checks, run on
every configuration in tests/test_estimator_checks.py)."""
import itertools
import pickle

import numpy as np
import pytest

from streamfit import MatrixEGPCA, MatrixGDPCA
from streamfit.pca._capped import FULL_EVERY
from streamfit.pca import mixture_decomposition, project_capped_simplex, systematic_sample
from streamfit._kernels import _capped as _kcapped
from streamfit.simulate import make_dense_stream, make_ftl_adversary, make_spiked_stream

from .._registry import make as make_case
from .._registry import names as registry_names
from ._cases import (BAD_DENSE, BOUNDS, PCA_BAD_VECTOR, REJECTED_FIT, VARIANTS, assert_unchanged,
                     check_bad_data, check_bad_params, check_fresh_rejects,
                     check_not_mutated_nor_aliased, check_rejected_fit,
                     check_same_seed_same_decisions, check_shallow_copy, dense, names, snapshot,
                     spiked, two_calls, variant_of)

ALGOS = {"meg": MatrixEGPCA, "gd": MatrixGDPCA}
# (algorithm, eta): the registry's configurations of this family (tests/_registry.py)
CONFIGS = [(name.split("-")[0], make_case(name).eta) for name in registry_names("capped")]
CONFIG_IDS = registry_names("capped")


# -- NumPy references -------------------------------------------------------------
#
# The projections by bisection on their one scalar (theta, log c), then solved
# in closed form on the active set the bisection found; the algorithms with
# W kept as its eigendecomposition (MEG: log W's, so tiny eigenvalues keep
# their precision), the learning rates written out from the docstrings.

def _logsumexp(a):
    a = np.asarray(a, dtype=float)
    top = a.max()
    if top == -np.inf:
        return -np.inf
    return float(top + np.log(np.exp(a - top).sum()))


def ref_euclidean(v, k):
    """clip(v - theta, 0, 1) with sum = k: bisection on the non-increasing
    g(theta) = sum clip(v - theta, 0, 1), then theta from the active set."""
    v = np.asarray(v, dtype=float)
    lo = v.min() - max(1.0, abs(v.min()))      # g(lo) = n >= k
    hi = v.max()                               # g(hi) = 0 <= k
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if np.clip(v - mid, 0, 1).sum() > k:
            lo = mid
        else:
            hi = mid
    theta = 0.5 * (lo + hi)
    active = (v - theta > 0) & (v - theta < 1)
    capped = v - theta >= 1
    if active.any():
        theta = (capped.sum() + v[active].sum() - k) / active.sum()
    return np.clip(v - theta, 0, 1)


def ref_entropy_log(mu, k):
    """log of min(1, c exp(mu)) with sum = k (mu may hold -inf: zero weight):
    bisection on log c, then log c from the uncapped entries."""
    mu = np.asarray(mu, dtype=float)
    n = mu.size
    top = np.sort(mu[np.isfinite(mu)])[::-1]
    lo = np.log(k / n) - top[0] - 1.0          # every entry below k/n: sum < k
    hi = -top[k - 1] + 1.0                     # the top k above 1: sum >= k

    def mass(lc):
        return np.minimum(1.0, np.exp(np.minimum(mu + lc, 1.0))).sum()

    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if mass(mid) < k:
            lo = mid
        else:
            hi = mid
    capped = mu + 0.5 * (lo + hi) >= 0
    if capped.sum() >= k:                      # the k-th entry sits exactly at 1
        capped[:] = False
        capped[np.argsort(-mu, kind="stable")[:k - 1]] = True
    logc = np.log(k - capped.sum()) - _logsumexp(mu[~capped])
    return np.where(capped, 0.0, np.minimum(0.0, mu + logc))


def ref_entropy(v, k):
    with np.errstate(divide="ignore"):
        return np.exp(ref_entropy_log(np.log(np.asarray(v, dtype=float)), k))


def dense_scale(X):
    # the dense L: min(||X||_F, max absolute row sum), both bound ||X||_2
    return min(float(np.sqrt(np.sum(X * X))), float(np.abs(X).sum(axis=1).max()))


def reference(algo, data, k, eta, *, dense=False):
    """Both algorithms from W_1 = (k/n) I. Returns W_{T+1}, the expected gain
    sum tr(W_t X_t), the number of MEG restarts and the last learning rate."""
    data = np.asarray(data, dtype=float)
    n = data.shape[-1]
    auto = isinstance(eta, str)
    B = k if dense else 1                      # MEG's tr(W X^2) <= B L^2
    V, w = np.eye(n), np.full(n, k / n)        # W = V diag(w) V^T
    logw = np.log(w)
    gain, L, G2, restarts, last = 0.0, 0.0, 0.0, 0, 0.0
    lam = 0.0                                  # MEG "auto": the run's scale Lambda
    for t, inst in enumerate(data, 1):
        X = inst if dense else np.outer(inst, inst)
        gain += float(np.sum(((V * w) @ V.T) * X))
        trsq = float(np.sum(X * X))
        scale = dense_scale(X) if dense else float(inst @ inst)
        L = max(L, scale)
        G2 = max(G2, trsq)
        if algo == "meg" and auto and ((t + 1) & t) == 0:
            # doubling trick: trial t + 1 = 2^j starts afresh at the scale so far
            V, w = np.eye(n), np.full(n, k / n)
            logw = np.log(w)
            restarts += 1
            lam = L
            continue
        if trsq == 0:
            continue                           # X = 0: the update is the identity
        if algo == "meg" and auto:
            lam = lam or scale
            if scale > 2 * lam:
                # the scale more than doubled: the epoch starts afresh at it
                V, w = np.eye(n), np.full(n, k / n)
                logw = np.log(w)
                restarts += 1
                lam = scale
                continue
        if algo == "meg":
            if auto:
                epoch = 2 ** int(np.floor(np.log2(t)))
                e = min(0.5, np.sqrt(k * np.log(n / k) / (B * epoch))) / lam
            else:
                e = eta
            mu, V = np.linalg.eigh((V * logw) @ V.T + e * X)
            logw = ref_entropy_log(mu, k)
            w = np.exp(logw)
        else:
            e = np.sqrt(2 * min(k, n - k)) / (np.sqrt(G2) * np.sqrt(t)) if auto else eta
            mu, V = np.linalg.eigh((V * w) @ V.T + e * X)
            w = ref_euclidean(mu, k)
        last = e
    return (V * w) @ V.T, gain, restarts, last


def top_k_sum(x, k):
    return float(np.sort(x)[::-1][:k].sum())


def powers_of_two_between(a, b):
    return sum(1 for j in range(64) if a <= 2 ** j <= b)


# -- data -------------------------------------------------------------------------

def vectors(T=300, n=8, seed=0, n_spikes=2, zeros=(4,)):
    """Spiked rows with norms growing over the stream (so the running maxima
    L_t and G_t move) and a few exact zero rows."""
    rng = np.random.default_rng(seed + 1000)
    X = make_spiked_stream(T, n, n_spikes=n_spikes, random_state=seed)
    X *= (rng.uniform(0.25, 1.0, T) * np.linspace(1.0, 3.0, T))[:, None]
    X[[z for z in zeros if z < T]] = 0.0
    return X


def dense_mixed(T=150, n=6, seed=0):
    """Low-rank PSD instances and diagonal ones (whose L is the row sum, not
    ||X||_F), scaled up over the stream, with one zero instance."""
    rng = np.random.default_rng(seed + 2000)
    Xs = make_dense_stream(T, n, rank=3, random_state=seed)
    diag = rng.random(T) < 0.3
    Xs[diag] = np.einsum("ti,ij->tij", rng.uniform(0, 1, (diag.sum(), n)), np.eye(n))
    Xs *= (rng.uniform(0.5, 1.0, T) * np.linspace(1.0, 2.0, T))[:, None, None]
    Xs[5] = 0.0
    return Xs


def make(algo="meg", eta="auto", k=2, **kw):
    return ALGOS[algo](k, eta=eta, **{"random_state": 0, **kw})


def kept(est, name):
    """The state object's own array (or field) ``name``: U (eigenvector rows),
    d (the kernel matrix's spectrum), M (the matrix, when stored), Wd (dense
    MEG's W), C, rng, ..."""
    return est._state.to_state()[name]


def _symmetric(lower):
    low = np.tril(lower)
    return low + np.tril(low, -1).T


# -- state comparisons (snapshot and assert_unchanged are in _cases) ----------------

def assert_same_state(a, b):
    assert_unchanged(b, snapshot(a))


def assert_same_results(a, b):
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.parameter_matrix(), b.parameter_matrix())
    np.testing.assert_array_equal(a.parameter_eigenvalues_, b.parameter_eigenvalues_)
    for name in ("cumulative_gain_", "realized_gain_", "regret_", "n_trials_", "eta_"):
        assert getattr(a, name) == getattr(b, name), name
    if isinstance(a, MatrixEGPCA):
        assert a.n_restarts_ == b.n_restarts_


# == 1. the projections =================================================================

def _random_vectors(seed, count):
    """(v, k) of sizes 1..40, scales 1e-12..1e12, with ties and both extremes of k."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        n = int(rng.integers(1, 41))
        k = int(rng.choice([1, n, rng.integers(1, n + 1)]))
        scale = 10.0 ** rng.uniform(-12, 12)
        kind = i % 4
        if kind == 0:
            v = rng.standard_normal(n)
        elif kind == 1:                                        # many ties
            v = rng.integers(-2, 3, n).astype(float)
        elif kind == 2:                                        # near-ties
            v = 1.0 + 1e-9 * rng.standard_normal(n)
        else:
            v = rng.exponential(size=n) ** 3
        yield v * scale, k


def test_euclidean_projection_matches_bisection():
    cases = 0
    for v, k in _random_vectors(0, 600):
        w = project_capped_simplex(v, k)
        ref = ref_euclidean(v, k)
        # w_i = v_i - theta is rounded at the scale of v
        tol = 1e-10 + 64 * np.finfo(float).eps * len(v) * np.abs(v).max()
        np.testing.assert_allclose(w, ref, rtol=0, atol=tol, err_msg=f"v={v!r}, k={k}")
        assert w.min() >= 0 and w.max() <= 1
        assert abs(w.sum() - k) <= tol
        cases += 1
    assert cases == 600


def test_euclidean_projection_is_the_projection():
    # the variational inequality (v - w) . (y - w) <= 0 for every y in the
    # capped simplex; the max over y of a linear function is at a corner (a
    # k-subset indicator), so max_y (v - w) . y = the top-k sum of v - w
    for v, k in _random_vectors(1, 400):
        v = v / max(1.0, np.abs(v).max())       # O(1) values: an absolute tolerance
        w = project_capped_simplex(v, k)
        g = v - w
        assert top_k_sum(g, k) - g @ w <= 1e-12 * len(v), (v, k)


def _brute_force_projection(v, k):
    # every assignment of the entries to {0, free, 1}: on the free set the
    # equality-constrained least squares solution is v - theta; keep the
    # feasible one nearest to v (the optimum is one of them)
    n, best, best_d = len(v), None, np.inf
    for labels in itertools.product((0, 1, 2), repeat=n):
        labels = np.array(labels)
        free, one = labels == 1, labels == 2
        w = one.astype(float)
        if free.any():
            theta = (one.sum() + v[free].sum() - k) / free.sum()
            w[free] = v[free] - theta
        elif one.sum() != k:
            continue
        if w.min() < -1e-12 or w.max() > 1 + 1e-12 or abs(w.sum() - k) > 1e-9:
            continue
        d = np.sum((w - v) ** 2)
        if d < best_d - 1e-15:
            best, best_d = w, d
    return best


def test_euclidean_projection_matches_brute_force_qp():
    rng = np.random.default_rng(2)
    for _ in range(60):
        n = int(rng.integers(1, 7))
        k = int(rng.integers(1, n + 1))
        v = rng.standard_normal(n) * rng.choice([0.1, 1.0, 3.0])
        np.testing.assert_allclose(project_capped_simplex(v, k), _brute_force_projection(v, k),
                                   rtol=0, atol=1e-10, err_msg=f"v={v!r}, k={k}")


def test_entropy_projection_matches_bisection():
    rng = np.random.default_rng(3)
    cases = 0
    for v, k in _random_vectors(4, 600):
        v = np.abs(v)
        # exact zeros in some vectors (zero weight, never rescaled), keeping k positive
        if rng.random() < 0.4 and len(v) > k:
            v[rng.choice(len(v), size=int(rng.integers(1, len(v) - k + 1)), replace=False)] = 0
        if np.count_nonzero(v) < k:
            continue
        w = project_capped_simplex(v, k, divergence="entropy")
        np.testing.assert_allclose(w, ref_entropy(v, k), rtol=0, atol=1e-10,
                                   err_msg=f"v={v!r}, k={k}")
        assert w.min() >= 0 and w.max() <= 1 and abs(w.sum() - k) <= 1e-10
        assert np.all(w[v == 0] == 0)
        # the form min(1, c v): one c for every entry below the cap
        part = (w > 0) & (w < 1)
        if part.sum() > 1:
            c = w[part] / v[part]
            np.testing.assert_allclose(c, c[0], rtol=1e-12)
        cases += 1
    assert cases > 500


def test_entropy_projection_is_the_projection():
    # the relative-entropy projection's variational inequality on the support:
    # <log(w / v), y - w> >= 0 for every y in the capped simplex, i.e. the
    # bottom-k sum of log(w / v) is at least its w-weighted sum
    for v, k in _random_vectors(5, 300):
        v = np.abs(v)
        if np.count_nonzero(v) < len(v):
            continue
        w = project_capped_simplex(v, k, divergence="entropy")
        g = np.log(w) - np.log(v)
        assert -top_k_sum(-g, k) - g @ w >= -1e-9 * max(1.0, np.abs(g).max()), (v, k)


@pytest.mark.parametrize("v, k, euclidean, entropy", [
    ([3.7], 1, [1.0], [1.0]),                                     # n = 1
    ([-2.0, 0.3, 5.0], 3, [1.0, 1.0, 1.0], None),                 # k = n
    ([0.2, 0.3, 5.0], 3, [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]),
    ([1.0, 1.0, 1.0, 1.0], 2, [0.5] * 4, [0.5] * 4),              # all tied
    ([0.0, 0.0, 5.0, 5.0], 2, [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]),
    ([3.0, 3.0, 3.0, 0.0], 2, [2 / 3, 2 / 3, 2 / 3, 0.0], [2 / 3, 2 / 3, 2 / 3, 0.0]),
    ([0.2, 1.9, 0.5, 0.1], 2, [4 / 15, 1.0, 17 / 30, 1 / 6], None),   # the docstring's
    ([1.0, 8.0, 2.0, 1.0], 2, None, [0.25, 1.0, 0.5, 0.25]),
    ([1e-300, 1e300, 1.0], 2, None, [1e-300, 1.0, 1.0]),           # 600 decades apart
    ([5e-324, 5e-324, 0.0], 1, [1 / 3] * 3, [0.5, 0.5, 0.0]),       # subnormal
    ([1e-300, 3e-300, 2e-300], 1, [1 / 3] * 3, [1 / 6, 1 / 2, 1 / 3]),
])
def test_projection_special_cases(v, k, euclidean, entropy):
    if euclidean is not None:
        np.testing.assert_allclose(project_capped_simplex(v, k), euclidean, rtol=0, atol=1e-12)
    if entropy is not None:
        np.testing.assert_allclose(project_capped_simplex(v, k, divergence="entropy"), entropy,
                                   rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("scale", [1e16, 1e20, 1e200])
def test_euclidean_projection_huge_magnitudes(scale):
    # Floats this large are 2 or more apart, so the exact projection is a 0/1
    # vector (the top k) whenever the k-th and (k+1)-th largest entries are
    # more than 1 apart, and all ones for k = n: representable exactly, and
    # summing to k. Ties share k equally (also exact). Only |v| >> 1, no overflow.
    rng = np.random.default_rng(6)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        k = int(rng.integers(1, n + 1))
        v = rng.standard_normal(n) * scale
        s = np.sort(v)
        if k < n and s[n - k] - s[n - k - 1] <= 2:
            continue
        top = np.zeros(n)
        top[np.argsort(v)[n - k:]] = 1.0
        w = project_capped_simplex(v, k)
        np.testing.assert_array_equal(w, top, err_msg=f"v={v!r}, k={k}")
    np.testing.assert_array_equal(project_capped_simplex([scale] * 4, 2), [0.5] * 4)
    np.testing.assert_array_equal(project_capped_simplex([scale, 2 * scale], 2), [1.0, 1.0])


def test_projection_validation():
    with pytest.raises(ValueError, match=names("v")):
        project_capped_simplex([1.0, np.nan], 1)
    with pytest.raises(ValueError, match=names("v")):
        project_capped_simplex([[1.0, 2.0]], 1)
    with pytest.raises(ValueError, match=names("v")):
        project_capped_simplex([], 1)
    with pytest.raises(ValueError, match=names("k")):
        project_capped_simplex([1.0, 2.0], 0)
    with pytest.raises(ValueError, match=names("k")):
        project_capped_simplex([1.0, 2.0], 3)
    with pytest.raises(TypeError, match=names("k")):
        project_capped_simplex([1.0, 2.0], 1.5)
    with pytest.raises(ValueError, match=names("divergence")):
        project_capped_simplex([1.0, 2.0], 1, divergence="kl")
    with pytest.raises(ValueError, match=names("v")):
        project_capped_simplex([1.0, -2.0], 1, divergence="entropy")
    with pytest.raises(ValueError, match="positive"):
        project_capped_simplex([1.0, 0.0, 0.0], 2, divergence="entropy")


# == 2. the mixture decomposition =========================================================

def check_mixture(w, k, weights, subsets):
    n = len(w)
    m = len(weights)
    assert subsets.shape == (m, k) and 1 <= m <= n + 1
    assert np.all(weights > 0) and abs(weights.sum() - 1) <= 1e-12
    assert subsets.min() >= 0 and subsets.max() < n
    assert all(len(set(s)) == k for s in subsets.tolist())
    cover = np.zeros(n)
    for p, s in zip(weights, subsets):
        cover[s] += p
    np.testing.assert_allclose(cover, w, rtol=0, atol=1e-12)
    # a zero entry is in no corner, an entry at 1 in every one
    assert not np.isin(subsets, np.flatnonzero(w == 0)).any()
    for i in np.flatnonzero(w == 1):
        assert (subsets == i).any(axis=1).all()


def _has_near_ties(w):
    # distinct fractional entries closer than 1e-8
    frac = np.unique(w[(w > 0) & (w < 1)])
    return frac.size > 1 and np.diff(frac).min() < 1e-8


def _capped_vectors(seed, count, near_ties=False):
    """Capped vectors from random ones: with near_ties, only those with
    distinct entries within 1e-8 of each other; without, only the others."""
    for v, k in _random_vectors(seed, count):
        v = v / max(1.0, np.abs(v).max())
        ws = [ref_euclidean(v, k)]
        if np.count_nonzero(v) >= k:
            ws.append(ref_entropy(np.abs(v), k))
        for w in ws:
            if _has_near_ties(w) == near_ties:
                yield w, k


def test_mixture_decomposition_reproduces_w():
    count = 0
    for w, k in _capped_vectors(7, 500):
        weights, subsets = mixture_decomposition(w, k)
        check_mixture(w, k, weights, subsets)
        count += 1
    assert count > 600


def test_mixture_decomposition_near_ties():
    # entries that agree to ~1e-12 (sum k to the last bit or two): valid input,
    # as W's eigenvalues are after small steps; each round must not strand
    # rounding residue that leaves fewer than k positive entries for the last corner
    w = np.array([0.49999999999961586, 0.5000000000004732, 0.5000000000002272,
                  0.5000000000006847, 0.4999999999996008, 0.4999999999993986])
    assert abs(w.sum() - 3) <= 1e-15
    check_mixture(w, 3, *mixture_decomposition(w, 3))
    for w, k in _capped_vectors(7, 500, near_ties=True):
        check_mixture(w, k, *mixture_decomposition(w, k))
    # the same through an estimator: a tiny learning rate keeps W near (k/n) I
    est = MatrixGDPCA(2, eta=1e-13, random_state=0).partial_fit(
        make_spiked_stream(10, 6, n_spikes=2, random_state=2))
    weights, bases = est.mixture_decomposition()
    np.testing.assert_allclose(np.einsum("j,jki,jkl->il", weights, bases, bases),
                               est.parameter_matrix(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("n, k", [(1, 1), (5, 1), (5, 2), (7, 3), (12, 11), (30, 7)])
def test_mixture_decomposition_uniform(n, k):
    w = np.full(n, k / n)
    check_mixture(w, k, *mixture_decomposition(w, k))


def test_mixture_decomposition_edge_cases():
    # exact 0 and 1 entries
    w = np.array([1.0, 0.0, 0.5, 1.0, 0.25, 0.0, 0.25])
    check_mixture(w, 3, *mixture_decomposition(w, 3))
    # k = n: one corner, everything
    weights, subsets = mixture_decomposition(np.ones(6), 6)
    np.testing.assert_array_equal(weights, [1.0])
    np.testing.assert_array_equal(np.sort(subsets[0]), np.arange(6))
    # k = 1: the corners are the singletons, with weights w_i (the positive ones)
    w = np.array([0.1, 0.0, 0.6, 0.3])
    weights, subsets = mixture_decomposition(w, 1)
    check_mixture(w, 1, weights, subsets)
    assert sorted(subsets[:, 0].tolist()) == [0, 2, 3]
    np.testing.assert_allclose(weights, w[subsets[:, 0]], rtol=0, atol=1e-15)
    # a projection already: one corner
    w = np.array([0.0, 1.0, 1.0, 0.0])
    weights, subsets = mixture_decomposition(w, 2)
    np.testing.assert_array_equal(weights, [1.0])
    assert sorted(subsets[0].tolist()) == [1, 2]


def test_mixture_decomposition_validation():
    with pytest.raises(ValueError, match=names("w")):
        mixture_decomposition([0.5, 0.5, 1.5], 2)          # above 1
    with pytest.raises(ValueError, match=names("w")):
        mixture_decomposition([0.5, 0.5, 0.5], 2)          # sums to 1.5
    with pytest.raises(ValueError, match=names("w")):
        mixture_decomposition([-0.5, 1.0, 1.5], 2)
    with pytest.raises(ValueError, match=names("w")):
        mixture_decomposition([0.5, np.nan], 1)
    with pytest.raises(ValueError, match=names("k")):
        mixture_decomposition([0.5, 0.5], 3)
    with pytest.raises(TypeError, match=names("k")):
        mixture_decomposition([0.5, 0.5], 1.0)


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("kind", ["vector", "dense"])
def test_estimator_mixture_decomposition(algo, eta, kind):
    est = make(algo, eta, k=3)
    if kind == "vector":
        est.partial_fit(vectors(120, 9, seed=1))
    else:
        est.partial_fit_dense(dense_mixed(60, 9, seed=1))
    W = est.parameter_matrix()
    weights, bases = est.mixture_decomposition()
    m = len(weights)
    assert bases.shape == (m, 3, 9) and m <= 10
    assert np.all(weights > 0) and abs(weights.sum() - 1) <= 1e-12
    for V in bases:
        np.testing.assert_allclose(V @ V.T, np.eye(3), rtol=0, atol=1e-12)
    mix = np.einsum("j,jki,jkl->il", weights, bases, bases)
    np.testing.assert_allclose(mix, W, rtol=0, atol=1e-12)


# == 3. sampling ============================================================================

def test_systematic_sample_inclusion_frequencies():
    # exact 0s and 1s, and fractional entries; every draw is k distinct indices,
    # ascending; entry i is taken with probability w_i: the frequencies are
    # within 5 binomial standard errors (exactly 0 / N for w_i in {0, 1})
    v = np.array([-3.0, 0.1, 0.4, 0.45, 0.9, 5.0, 6.0, -1.0, 0.7, 0.2, 0.55, 0.3])
    k, N = 5, 200_000
    w = ref_euclidean(v, k)
    assert (w == 0).any() and (w == 1).any()
    draws = systematic_sample(w, k, size=N, random_state=0)
    assert draws.shape == (N, k) and np.issubdtype(draws.dtype, np.integer)
    assert np.all(np.diff(draws, axis=1) > 0)
    freq = np.bincount(draws.ravel(), minlength=len(w)) / N
    np.testing.assert_array_less(np.abs(freq - w), 5 * np.sqrt(w * (1 - w) / N) + 1e-15)
    one = systematic_sample(w, k, random_state=1)
    assert one.shape == (k,)
    assert systematic_sample(w, k, size=0, random_state=0).shape == (0, k)


def test_systematic_sample_is_systematic_sampling():
    # the documented algorithm: one uniform u per draw (the generator's random()),
    # the points u, u + 1, ..., u + k - 1 in the intervals of the cumulative sums
    rng = np.random.default_rng(8)
    for seed in range(40):
        n = int(rng.integers(1, 20))
        k = int(rng.integers(1, n + 1))
        w = ref_euclidean(rng.standard_normal(n), k)
        draws = systematic_sample(w, k, size=100, random_state=seed)
        u = np.random.default_rng(seed).random(100)
        c = np.cumsum(w)
        c[-1] = k
        lo = np.r_[0.0, c[:-1]]
        for row, ui in zip(draws, u):
            pts = ui + np.arange(k)
            hit = ((pts[None, :] >= lo[:, None]) & (pts[None, :] < c[:, None])).any(axis=1)
            np.testing.assert_array_equal(row, np.flatnonzero(hit))


def test_systematic_sample_validation():
    w = np.array([0.5, 0.5, 1.0])
    with pytest.raises(ValueError, match=names("w")):
        systematic_sample([0.5, 0.6, 1.0], 2)
    with pytest.raises(ValueError, match=names("k")):
        systematic_sample(w, 4)
    with pytest.raises(ValueError, match=names("size")):
        systematic_sample(w, 2, size=-1)
    with pytest.raises(TypeError, match=names("size")):
        systematic_sample(w, 2, size=2.5)
    with pytest.raises(TypeError, match=names("random_state")):
        systematic_sample(w, 2, random_state="seed")
    np.testing.assert_array_equal(systematic_sample(w, 2, size=50, random_state=3),
                                  systematic_sample(w, 2, size=50, random_state=3))


@pytest.mark.parametrize("algo", ["meg", "gd"])
def test_sample_projection_is_a_rank_k_projection_with_mean_W(algo):
    k, n, N = 3, 8, 4000
    est = make(algo, k=k, random_state=11).partial_fit(vectors(150, n, seed=2))
    W = est.parameter_matrix()
    lam, Q = np.linalg.eigh(W)
    frac = (lam > 1e-9) & (lam < 1 - 1e-9)
    assert frac.sum() >= 3 and np.diff(lam[frac]).min() > 1e-6     # a real mixture
    Ps = np.stack([est.sample_projection() for _ in range(N)])
    assert np.array_equal(Ps, Ps.transpose(0, 2, 1))
    np.testing.assert_allclose(Ps @ Ps, Ps, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.trace(Ps, axis1=1, axis2=2), k, rtol=0, atol=1e-12)
    # each P projects onto eigenvectors of W: it commutes with W, and is
    # diagonal with 0/1 entries in W's eigenbasis
    np.testing.assert_allclose(Ps @ W, W @ Ps, rtol=0, atol=1e-12)
    D = np.einsum("ij,tik,kl->tjl", Q, Ps, Q)
    np.testing.assert_allclose(D[:, frac][:, :, frac], np.round(D[:, frac][:, :, frac]),
                               rtol=0, atol=1e-9)
    # eigenvector i is in P with probability lam_i: 5 binomial standard errors
    freq = np.diagonal(D, axis1=1, axis2=2).mean(axis=0)
    se = np.sqrt(lam[frac] * (1 - lam[frac]) / N)
    np.testing.assert_array_less(np.abs(freq[frac] - lam[frac]), 5 * se)
    np.testing.assert_allclose(freq[~frac], np.round(lam[~frac]), rtol=0, atol=1e-9)
    # the Monte Carlo mean approaches W: E ||mean - W||_F^2 = (k - tr W^2) / N
    assert np.linalg.norm(Ps.mean(axis=0) - W) <= 5 * np.sqrt((k - np.trace(W @ W)) / N)
    # sampling draws from the generator, not from W
    np.testing.assert_array_equal(est.parameter_matrix(), W)
    assert not np.array_equal(Ps[0], Ps[1]) or not np.array_equal(Ps[1], Ps[2])


@pytest.mark.parametrize("algo", ["meg", "gd"])
def test_components_are_sampled_from_W(algo):
    est = make(algo, k=3).partial_fit(vectors(150, 8, seed=2))
    V = est.components_
    assert V.shape == (3, 8)
    np.testing.assert_allclose(V @ V.T, np.eye(3), rtol=0, atol=1e-12)
    P = V.T @ V
    W = est.parameter_matrix()
    np.testing.assert_allclose(P @ W, W @ P, rtol=0, atol=1e-12)
    # a property of the state: asking again gives the same projection
    np.testing.assert_array_equal(est.components_, V)
    X = spiked(5, 8)
    np.testing.assert_array_equal(est.transform(X), X @ V.T)


# == 4. W stays in the capped simplex ====================================================

LONG = 10_000


@pytest.fixture(scope="module")
def long_streams():
    rng = np.random.default_rng(9)
    X = make_spiked_stream(LONG, 6, n_spikes=2, random_state=9) * rng.uniform(0.2, 3, (LONG, 1))
    return X, make_dense_stream(LONG, 5, rank=2, random_state=9)


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("kind", ["vector", "dense"])
def test_W_stays_in_the_capped_simplex_over_long_runs(algo, eta, kind, long_streams):
    X, Xs = long_streams
    k = 2
    est = make(algo, eta, k=k)
    for a in range(0, LONG, 100):
        if kind == "vector":
            est.partial_fit(X[a:a + 100])
        else:
            est.partial_fit_dense(Xs[a:a + 100], check_psd=False)
        w = est.parameter_eigenvalues_
        assert w.min() >= 0 and w.max() <= 1, a
        assert abs(w.sum() - k) <= 1e-10, a
        W = est.parameter_matrix()
        np.testing.assert_allclose(W, W.T, rtol=0, atol=1e-14)
        lam = np.linalg.eigvalsh(W)
        assert lam.min() >= -1e-10 and lam.max() <= 1 + 1e-10 and abs(lam.sum() - k) <= 1e-10
        if kind == "vector":
            # the kernel's matrix kept as its eigendecomposition (rank-one
            # updates, a full one every FULL_EVERY-th): U stays orthogonal, and
            # the spectrum is W's (GD) or log W's (MEG; the capped at exactly 0)
            U, d = kept(est, "U"), kept(est, "d")
            assert np.abs(U @ U.T - np.eye(len(w))).max() <= 1e-12, a
            if algo == "gd":
                np.testing.assert_array_equal(d, w)
            else:
                assert d.max() <= 0 and np.all((d == 0) == (w == 1)), a
                np.testing.assert_allclose(np.exp(d), w, rtol=1e-13, atol=0)
            continue
        # the kernel's running matrix (GD: W; MEG: log W, corrected by low-rank
        # updates) does not drift from the W the eigendecomposition gives
        M = _symmetric(kept(est, "M"))
        if algo == "gd":
            np.testing.assert_allclose(M, W, rtol=0, atol=1e-10)
        else:
            mu, U = np.linalg.eigh(M)
            assert mu.max() <= 1e-10                        # log W <= 0
            np.testing.assert_allclose((U * np.exp(mu)) @ U.T, W, rtol=0, atol=1e-10)
            if kind == "dense":
                np.testing.assert_allclose(_symmetric(kept(est, "Wd")), W, rtol=0,
                                           atol=1e-10)
    assert est.n_trials_ == LONG


# == 5. against the NumPy reference =========================================================

@pytest.mark.parametrize("algo, eta", CONFIGS + [("meg", 2.0), ("gd", 5.0)],
                         ids=CONFIG_IDS + ["meg-2.0", "gd-5.0"])
@pytest.mark.parametrize("kind", ["vector", "dense"])
def test_matches_numpy_reference(algo, eta, kind):
    if kind == "vector":
        data, k = vectors(300, 8, seed=3, zeros=(0, 4, 150)), 3
        est = make(algo, eta, k=k).partial_fit(data)
    else:
        data, k = dense_mixed(150, 6, seed=3), 2
        est = make(algo, eta, k=k).partial_fit_dense(data)
    W, gain, restarts, last = reference(algo, data, k, eta, dense=kind == "dense")
    np.testing.assert_allclose(est.parameter_matrix(), W, rtol=0, atol=1e-10)
    np.testing.assert_allclose(est.cumulative_gain_, gain, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(est.eta_, last, rtol=1e-12)
    if algo == "meg":
        assert est.n_restarts_ == restarts
        assert (restarts > 0) == (eta == "auto")
    elif kind == "dense":
        # both of GD's ways to rebuild W (from its support, or by correcting the
        # clipped directions) were taken
        rebuilds = est._state.rebuilds_
        assert 0 < rebuilds < len(data) - 2
    # the bookkeeping around the gain
    C = data.sum(axis=0) if kind == "dense" else data.T @ data
    np.testing.assert_allclose(est.cumulative_matrix(), C, rtol=0, atol=1e-10 * len(data))
    best = top_k_sum(np.linalg.eigvalsh(C), k)
    np.testing.assert_allclose(est.best_gain_, best, rtol=1e-12)
    np.testing.assert_allclose(est.regret_, best - est.cumulative_gain_, rtol=1e-10, atol=1e-9)


# Vector instances keep the kernel's matrix as its eigendecomposition and update
# it by rank-one steps (csrc/_rank1.pxd, tested on its own in test_rank1.py),
# with a full dsyevd every _full_every-th update; _full_every = 0 is the old
# way (the matrix stored, dsyevd every update). Tolerance: W to 1e-10 absolute,
# the gains to 1e-12 relative, as for the stored path above (measured
# differences ~1e-14 for W after 10^4 trials without any refresh).

def rank_one_make(algo, eta, full_every, **kw):
    est = make(algo, eta, **kw)
    est._full_every = full_every
    return est


@pytest.mark.parametrize("algo, eta", CONFIGS + [("meg", 2.0), ("gd", 5.0)],
                         ids=CONFIG_IDS + ["meg-2.0", "gd-5.0"])
@pytest.mark.parametrize("full_every", [0, 1, 7, 10 ** 9])
def test_rank_one_updates_match_numpy_reference(algo, eta, full_every):
    data, k = vectors(300, 8, seed=3, zeros=(0, 4, 150)), 3
    est = rank_one_make(algo, eta, full_every, k=k).partial_fit(data)
    W, gain, restarts, last = reference(algo, data, k, eta)
    np.testing.assert_allclose(est.parameter_matrix(), W, rtol=0, atol=1e-10)
    np.testing.assert_allclose(est.cumulative_gain_, gain, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(est.eta_, last, rtol=1e-12)
    if algo == "meg":
        assert est.n_restarts_ == restarts
    # which path each update took: the 3 zero rows and MEG's restart trials
    # (one of which may be a zero row) update nothing
    stats = est.update_stats_
    updates = stats["full"] + stats["rank_one"]
    assert len(data) - 3 - restarts <= updates <= len(data) - 3
    assert updates == len(data) - 3 or restarts > 0
    assert stats["rank_one_failed"] == stats["eig_fallbacks"] == 0
    if full_every == 0:
        assert stats["rank_one"] == 0 and kept(est, "M").shape == (8, 8)
    else:
        assert kept(est, "M").shape == (0, 0)
        if full_every == 1:
            assert stats["rank_one"] == 0
        elif full_every == 7:
            # every 7th update since the last restart is a full one
            assert updates / 7 - restarts - 1 <= stats["full"] <= updates / 7 + restarts + 1
        else:
            assert stats["full"] == 0
        if stats["rank_one"]:
            assert 0 < stats["mean_block"] <= 8


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
def test_ten_thousand_rank_one_updates_without_refresh(algo, eta):
    # 10^4 trials of rank-one updates and no full decomposition at all, against
    # the stored matrix decomposed afresh every trial: U stays orthogonal and
    # W, the expected gains and the regret stay the same to rounding
    T, n, k = 10_000, 10, 3
    rng = np.random.default_rng(21)
    X = make_spiked_stream(T, n, n_spikes=3, random_state=21) * rng.uniform(0.2, 3, (T, 1))
    est = rank_one_make(algo, eta, 10 ** 9, k=k).partial_fit(X)
    ref = rank_one_make(algo, eta, 0, k=k).partial_fit(X)
    assert est.update_stats_["full"] == 0 and ref.update_stats_["rank_one"] == 0
    U = kept(est, "U")
    # measured ~1e-14
    assert np.abs(U @ U.T - np.eye(n)).max() <= 1e-12
    np.testing.assert_allclose(est.parameter_matrix(), ref.parameter_matrix(), rtol=0,
                               atol=1e-11)
    np.testing.assert_allclose(est.parameter_eigenvalues_, ref.parameter_eigenvalues_,
                               rtol=0, atol=1e-11)
    np.testing.assert_allclose(est.cumulative_gain_, ref.cumulative_gain_, rtol=1e-12)
    np.testing.assert_allclose(est.regret_, ref.regret_, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
def test_rank_one_path_pickles_and_chunks_bit_identically(algo, eta):
    # across full refreshes (every 7th update) and MEG's restarts: the refresh
    # schedule lives in the state, so neither pickling nor the split into
    # calls changes a bit, nor the generator's one uniform per trial
    data = vectors(200, 12, seed=4)
    one = rank_one_make(algo, eta, 7).partial_fit(data)
    est = rank_one_make(algo, eta, 7)
    for a, b in zip(BOUNDS[:-1], BOUNDS[1:]):
        est.partial_fit(data[a:b])
        est = pickle.loads(pickle.dumps(est))
    assert_same_results(one, est)
    assert_same_state(one, est)
    assert one.update_stats_["full"] > 10 and one.update_stats_["rank_one"] > 100
    assert kept(one, "rng") == kept(est, "rng")


def test_changing_full_every_between_modes_is_refused():
    est = rank_one_make("gd", 0.5, 7).partial_fit(spiked(20, 6))
    before = snapshot(est)
    est._full_every = 0
    with pytest.raises(ValueError, match="_full_every"):
        est.partial_fit(spiked(5, 6, seed=1))
    assert_unchanged(est, before)
    est._full_every = 3          # another refresh period: fine, from the next update
    est.partial_fit(spiked(5, 6, seed=1))
    assert est.n_trials_ == 25


@pytest.mark.parametrize("algo, eta, k", [("gd", "auto", 2), ("gd", 0.5, 2), ("meg", 0.5, 2),
                                          ("meg", "auto", 1)])
def test_rank_one_dense_instances_equal_vector_instances(algo, eta, k):
    # x x^T as a dense instance: the same ||X||_F and (as max|x_i| ||x||_1 >=
    # ||x||^2) the same L; MEG's "auto" uses B = k for dense, 1 for vectors, so
    # they agree there for k = 1 only
    X = vectors(200, 7, seed=4)
    a = make(algo, eta, k=k).partial_fit(X)
    b = make(algo, eta, k=k).partial_fit_dense(np.einsum("ti,tj->tij", X, X))
    np.testing.assert_allclose(b.parameter_matrix(), a.parameter_matrix(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.cumulative_gain_, a.cumulative_gain_, rtol=1e-12)


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("kind", ["vector", "dense"])
def test_gains_are_those_of_the_visible_decisions(algo, eta, kind):
    # one trial at a time: the expected gain is tr(W X) with the W that
    # parameter_matrix() shows before the trial, the realized gain tr(P X) with
    # the P = V^T V that components_ shows before it
    data = vectors(80, 7, seed=5) if kind == "vector" else dense_mixed(60, 7, seed=5)
    est = make(algo, eta, k=3)
    fit = est.partial_fit if kind == "vector" else est.partial_fit_dense
    fit(data[:0])
    expected = realized = 0.0
    for inst in data:
        X = np.outer(inst, inst) if kind == "vector" else inst
        V = est.components_
        expected += float(np.sum(est.parameter_matrix() * X))
        realized += float(np.trace(V @ X @ V.T))
        fit(inst[None])
    np.testing.assert_allclose(est.cumulative_gain_, expected, rtol=1e-12)
    np.testing.assert_allclose(est.realized_gain_, realized, rtol=1e-12)
    assert est.n_trials_ == len(data)


@pytest.mark.parametrize("algo", ["meg", "gd"])
@pytest.mark.parametrize("eta", ["auto", 0.5])
def test_regret_below_the_bound_on_the_ftl_adversary(algo, eta):
    est = make(algo, eta, k=2).partial_fit(make_ftl_adversary(2000, 10, n_components=2))
    assert 0 < est.regret_ < est.regret_bound()
    assert est.regret_bound(4000) > est.regret_bound()


# == 6. the contract ============================================================================

# The cases both families share (PCA_BAD_VECTOR, BAD_DENSE, REJECTED_FIT, VARIANTS)
# and their checks are in _cases; the ones below are this family's own.


def prefit(algo, eta, kind):
    """Two calls, so that the state and the rng exist and have moved."""
    return two_calls(make(algo, eta), kind)


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("kind, bad", [("vector", b) for b in sorted(PCA_BAD_VECTOR)]
                         + [("dense", b) for b in sorted(BAD_DENSE)])
def test_bad_data_rejected_and_state_unchanged(algo, eta, kind, bad):
    est, ref = check_bad_data(lambda kind: prefit(algo, eta, kind), kind,
                              {**PCA_BAD_VECTOR, **BAD_DENSE}[bad])
    assert_same_results(est, ref)
    assert_same_state(est, ref)


# name: (params, exception, argument named)
BAD_PARAMS = {
    "n_components-0": ({"n_components": 0}, ValueError, "n_components"),
    "n_components-above-n": ({"n_components": 21}, ValueError, "n_components"),
    "n_components-negative": ({"n_components": -1}, ValueError, "n_components"),
    "n_components-float": ({"n_components": 2.5}, TypeError, "n_components"),
    "n_components-bool": ({"n_components": True}, TypeError, "n_components"),
    "n_components-changed": ({"n_components": 3}, ValueError, "n_components"),
    "eta-negative": ({"eta": -0.1}, ValueError, "eta"),
    "eta-0": ({"eta": 0.0}, ValueError, "eta"),
    "eta-nan": ({"eta": float("nan")}, ValueError, "eta"),
    "eta-inf": ({"eta": float("inf")}, ValueError, "eta"),
    "eta-str": ({"eta": "fast"}, ValueError, "eta"),
    "eta-none": ({"eta": None}, TypeError, "eta"),
    "eta-bool": ({"eta": True}, TypeError, "eta"),
    "random_state-str": ({"random_state": "seed"}, TypeError, "random_state"),
    "random_state-float": ({"random_state": 1.5}, TypeError, "random_state"),
}


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("kind", ["vector", "dense"])
@pytest.mark.parametrize("bad", sorted(BAD_PARAMS))
def test_bad_params_rejected_and_state_unchanged(algo, eta, kind, bad):
    params, exc, arg = BAD_PARAMS[bad]
    est, ref = check_bad_params(lambda kind: prefit(algo, eta, kind), kind, params, exc, arg)
    assert_same_results(est, ref)


@pytest.mark.parametrize("cls", [MatrixEGPCA, MatrixGDPCA])
@pytest.mark.parametrize("params, exc, arg", [
    ({"n_components": 0}, ValueError, "n_components"),
    ({"n_components": 21}, ValueError, "n_components"),
    ({"n_components": "2"}, TypeError, "n_components"),
    ({"eta": -1.0}, ValueError, "eta"),
    ({"eta": 0}, ValueError, "eta"),
    ({"eta": float("nan")}, ValueError, "eta"),
    ({"eta": "fast"}, ValueError, "eta"),
    ({"random_state": "seed"}, TypeError, "random_state"),
    ({"random_state": True}, TypeError, "random_state"),
])
def test_bad_params_leave_fresh_estimator_unfitted(cls, params, exc, arg):
    check_fresh_rejects(cls(**{"n_components": 2, **params}),
                        lambda est: est.partial_fit(spiked(20, 20)), exc, arg)


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("bad", sorted(REJECTED_FIT))
def test_rejected_fit_keeps_state(algo, eta, bad):
    check_rejected_fit(lambda kind: prefit(algo, eta, kind), REJECTED_FIT[bad])


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
def test_fit_starts_afresh(algo, eta):
    X = spiked(200, 20)
    est = make(algo, eta).partial_fit(X[:50])
    assert est.fit(X) is est
    assert_same_results(est, make(algo, eta).partial_fit(X))
    assert_same_state(est, make(algo, eta).partial_fit(X))
    # and from vectors to dense instances (a new stream may change the kind)
    Xs = dense(20, 10)
    assert est.fit_dense(Xs) is est
    assert_same_results(est, make(algo, eta).partial_fit_dense(Xs))
    assert est.instances_ == "dense" and est.n_features_in_ == 10


@pytest.mark.parametrize("cls", [MatrixEGPCA, MatrixGDPCA])
def test_not_fitted(cls):
    est = cls(2)
    for name in ("components_", "cumulative_gain_", "realized_gain_", "regret_", "n_trials_",
                 "eta_", "parameter_eigenvalues_"):
        with pytest.raises(AttributeError, match="fit"):
            getattr(est, name)
    for method in ("parameter_matrix", "cumulative_matrix", "sample_projection",
                   "mixture_decomposition", "regret_bound"):
        with pytest.raises(AttributeError, match="fit"):
            getattr(est, method)()


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("variant, kind", [
    (variant, kind) for variant in sorted(VARIANTS) for kind in ("vector", "dense")
    if (variant, kind) != ("float32", "vector")])      # check_float32_input's
def test_input_types_match_float64(algo, eta, variant, kind):
    # full-rank dense instances, so that float32 rounding keeps them PSD
    data = spiked(150, 12) if kind == "vector" else dense(40, 8, rank=12)
    data_in, data_ref = variant_of(variant, data)
    method = "partial_fit" if kind == "vector" else "partial_fit_dense"
    est, ref = make(algo, eta), make(algo, eta)
    getattr(est, method)(data_in)
    getattr(ref, method)(data_ref)
    assert_same_results(est, ref)
    assert_same_state(est, ref)


def test_input_not_mutated_nor_aliased():
    check_not_mutated_nor_aliased([(make("meg").partial_fit, spiked(100, 20)),
                                   (make("gd").partial_fit_dense, dense(20, 10)),
                                   (make("meg", 0.5).partial_fit_dense, dense(20, 10))])


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
def test_pickle_mid_stream_dense(algo, eta):
    # vector instances: check_pickle_resume
    data, fit = dense(60, 8, seed=3), "partial_fit_dense"
    est = getattr(make(algo, eta), fit)(data[:70])
    twin = pickle.loads(pickle.dumps(est))
    assert_same_state(est, twin)
    assert_same_results(est, twin)
    getattr(est, fit)(data[70:])
    getattr(twin, fit)(data[70:])
    assert_same_results(est, twin)
    assert_same_state(est, twin)
    # and the same as never stopping
    assert_same_results(est, getattr(make(algo, eta), fit)(data))


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
def test_chunking_invariance_dense(algo, eta):
    # vector instances: check_chunking_invariance
    data, fit = dense_mixed(200, 8, seed=4), "partial_fit_dense"
    one = getattr(make(algo, eta), fit)(data)
    chunked = make(algo, eta)
    for a, b in zip(BOUNDS[:-1], BOUNDS[1:]):
        getattr(chunked, fit)(data[a:b])
        if b > 0:
            # the decision shown mid-stream is the one the full run played then
            np.testing.assert_array_equal(chunked.components_,
                                          getattr(make(algo, eta), fit)(data[:b]).components_)
    assert_same_results(one, chunked)
    assert_same_state(one, chunked)


@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
def test_same_seed_same_decisions(algo, eta):
    X = vectors(150, 10, seed=5)
    a = check_same_seed_same_decisions(
        lambda seed: make(algo, eta, k=3, random_state=seed), X, assert_same_results)
    # another seed samples other projections from the very same W_t
    other = make(algo, eta, k=3, random_state=8).partial_fit(X)
    assert other.realized_gain_ != a.realized_gain_
    assert other.cumulative_gain_ == a.cumulative_gain_
    np.testing.assert_array_equal(other.parameter_matrix(), a.parameter_matrix())


@pytest.mark.parametrize("algo", ["meg", "gd"])
@pytest.mark.parametrize("kind", ["vector", "dense"])
def test_fixed_eta_is_reported(algo, kind):
    est = make(algo, 0.37)
    if kind == "vector":
        est.partial_fit(spiked(0, 10))
        assert est.eta_ == 0.0                     # no update yet
        est.partial_fit(spiked(50, 10))
    else:
        est.partial_fit_dense(dense(0, 10))
        assert est.eta_ == 0.0
        est.partial_fit_dense(dense(20, 10))
    assert est.eta_ == 0.37
    if algo == "meg":
        assert est.n_restarts_ == 0


@pytest.mark.parametrize("T", [1, 2, 3, 4, 7, 8, 15, 16, 100, 255, 256])
def test_meg_auto_restarts_once_per_power_of_two(T):
    # the doubling trick's epochs [2^j, 2^(j+1)): after T trials, the epochs
    # started afresh are those beginning at 2, 4, ..., 2^j <= T + 1 (the reset
    # for trial T + 1 happens when trial T ends)
    X = vectors(T, 6, seed=6, zeros=())
    X /= np.linalg.norm(X, axis=1, keepdims=True)     # one scale: epochs only
    est = make("meg", "auto").partial_fit(X)
    assert est.n_restarts_ == powers_of_two_between(2, T + 1)


def test_meg_auto_restarts_reset_W():
    # trial 2^j is played with W = (k/n) I: its expected gain is (k/n) ||x||^2
    X = vectors(70, 6, seed=6, zeros=())
    X /= np.linalg.norm(X, axis=1, keepdims=True)     # one scale: epochs only
    est = make("meg", "auto", k=2).partial_fit(X[:0])
    for t, x in enumerate(X, 1):
        before = est.cumulative_gain_
        if t & (t - 1) == 0:
            np.testing.assert_allclose(est.parameter_matrix(), np.eye(6) / 3, rtol=0,
                                       atol=1e-15)
        else:
            assert not np.allclose(est.parameter_matrix(), np.eye(6) / 3)
        est.partial_fit(x[None])
        if t & (t - 1) == 0:
            np.testing.assert_allclose(est.cumulative_gain_ - before, x @ x / 3, rtol=1e-12)


def flat_repr(est):
    # scikit-learn's repr wraps long lines
    return " ".join(repr(est).split())


def test_get_set_params_repr_clone():
    est = MatrixEGPCA(3, random_state=0)
    assert est.get_params() == dict(n_components=3, eta="auto", random_state=0)
    assert flat_repr(est) == "MatrixEGPCA(n_components=3, random_state=0)"
    assert est.set_params(eta=0.25) is est
    assert est.eta == 0.25 and est.get_params()["eta"] == 0.25
    assert flat_repr(est) == "MatrixEGPCA(eta=0.25, n_components=3, random_state=0)"
    with pytest.raises(ValueError, match="bogus"):
        est.set_params(bogus=1)
    gd = MatrixGDPCA(2, eta=0.5)
    assert gd.get_params() == dict(n_components=2, eta=0.5, random_state=None)
    assert flat_repr(gd) == "MatrixGDPCA(eta=0.5, n_components=2)"


def test_shallow_copy_does_not_share_the_state():
    X = spiked(60, 12)
    for est in (make("meg").partial_fit(X[:30]), make("gd", 0.5).partial_fit(X[:30])):
        check_shallow_copy(est, X[30:], assert_same_results)


@pytest.mark.parametrize("algo", ["meg", "gd"])
@pytest.mark.parametrize("scale", [2.0 ** -4, 2.0 ** 4], ids=["2^-4", "2^4"])
def test_scale_invariance(algo, scale):
    # "auto" eta scales like 1 / ||X||: with x -> c x (c a power of 2, exact) the
    # same W, bit for bit, and gains c^2 times as large
    X = vectors(200, 8, seed=7)
    a = make(algo).partial_fit(X)
    b = make(algo).partial_fit(scale * X)
    np.testing.assert_array_equal(b.parameter_matrix(), a.parameter_matrix())
    np.testing.assert_array_equal(b.components_, a.components_)
    assert b.cumulative_gain_ == scale ** 2 * a.cumulative_gain_
    assert b.realized_gain_ == scale ** 2 * a.realized_gain_
    Xs = dense_mixed(80, 6, seed=7)
    a = make(algo).partial_fit_dense(Xs)
    b = make(algo).partial_fit_dense(scale * Xs)
    np.testing.assert_array_equal(b.parameter_matrix(), a.parameter_matrix())
    assert b.cumulative_gain_ == scale * a.cumulative_gain_


@pytest.mark.parametrize("algo", ["meg", "gd"])
@pytest.mark.parametrize("scale", [2.0 ** -300, 2.0 ** 300], ids=["2^-300", "2^300"])
def test_scale_invariance_extreme_but_representable_scales(algo, scale):
    # ||x||^2 = 2^(+-600) ||x_0||^2 is far inside float64's range (and accepted:
    # the overflow check allows it), so "auto" eta must still follow the scale
    X = vectors(100, 6, seed=8, zeros=())
    a = make(algo).partial_fit(X)
    b = make(algo).partial_fit(scale * X)
    np.testing.assert_allclose(b.parameter_matrix(), a.parameter_matrix(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.cumulative_gain_, scale ** 2 * a.cumulative_gain_, rtol=1e-12)


@pytest.mark.parametrize("algo", ["meg", "gd"])
@pytest.mark.parametrize("eta", ["auto", 0.5])
def test_k_equal_n_keeps_W_the_identity(algo, eta):
    X = vectors(50, 5, seed=9)
    est = make(algo, eta, k=5).partial_fit(X)
    np.testing.assert_allclose(est.parameter_matrix(), np.eye(5), rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.cumulative_gain_, np.sum(X * X), rtol=1e-12)
    np.testing.assert_allclose(est.realized_gain_, np.sum(X * X), rtol=1e-12)
    assert abs(est.regret_) <= 1e-9


# == 7. the realized gain is an unbiased estimate of the expected gain =====================

@pytest.mark.parametrize("algo, eta", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("kind", ["vector", "dense"])
def test_realized_gain_is_unbiased(algo, eta, kind):
    S = 250
    if kind == "vector":
        data, fit = vectors(120, 6, seed=10), "partial_fit"
    else:
        data, fit = dense_mixed(100, 6, seed=10), "partial_fit_dense"
    first = getattr(make(algo, eta, random_state=0), fit)(data)
    realized = np.empty(S)
    for seed in range(S):
        est = getattr(make(algo, eta, random_state=seed), fit)(data)
        # W_t does not depend on the samples: the expected gain, bit for bit
        assert est.cumulative_gain_ == first.cumulative_gain_
        np.testing.assert_array_equal(est.parameter_matrix(), first.parameter_matrix())
        realized[seed] = est.realized_gain_
    assert realized.std() > 0
    se = realized.std(ddof=1) / np.sqrt(S)
    assert abs(realized.mean() - first.cumulative_gain_) <= 4.5 * se


# == 8. capping and projections are reached ==================================================

def _rotation(n, seed):
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))[0]


@pytest.mark.parametrize("rotate", [False, True])
def test_meg_caps_at_one(rotate):
    # n = 4, k = 2, eta = 1, x = e_0 every trial. From W_1 = I/2 the update
    # gives e_0 the weight 2e/(e + 3) < 1; next time 2e^2/(e^2 + 3) > 1, so it
    # is capped at exactly 1 and the other three share the remaining 1.
    Q = _rotation(4, 0) if rotate else np.eye(4)
    x = Q[:, 0]
    est = make("meg", 1.0, k=2).partial_fit(x[None])
    top = 2 * np.e / (np.e + 3)
    np.testing.assert_allclose(est.cumulative_gain_, 0.5, rtol=1e-12)
    np.testing.assert_allclose(est.parameter_eigenvalues_, [(2 - top) / 3] * 3 + [top],
                               rtol=1e-12)
    est.partial_fit(x[None])
    realized = est.realized_gain_
    for t in range(3, 9):
        est.partial_fit(x[None])
        w = est.parameter_eigenvalues_
        assert w[-1] == 1.0                                      # capped, exactly
        np.testing.assert_allclose(w[:3], 1 / 3, rtol=1e-12)
        W = est.parameter_matrix()
        np.testing.assert_allclose(W @ x, x, rtol=0, atol=1e-12)
        # a direction at 1 is in every sampled projection
        for _ in range(20):
            P = est.sample_projection()
            np.testing.assert_allclose(P @ x, x, rtol=0, atol=1e-12)
    # gains 1/2, top, then 1 on every trial, sampled or expected
    np.testing.assert_allclose(est.cumulative_gain_, 0.5 + top + 6, rtol=1e-12)
    np.testing.assert_allclose(est.realized_gain_ - realized, 6.0, rtol=1e-12)


def test_meg_caps_k_minus_one_directions():
    # n = 6, k = 3, eta = 2, X = P the projection onto two directions (dense).
    # From W_1 = I/2 both would get 3 e^2 / (2 e^2 + 4) = 1.18 > 1: capping
    # takes both to exactly 1 (k - 1 = 2, the most it can) and leaves the
    # remaining mass 1 to the other four: W = P + (I - P)/4 after every trial.
    n, k = 6, 3
    Q = _rotation(n, 1)
    P = Q[:, :2] @ Q[:, :2].T
    P = (P + P.T) / 2
    Xs = np.stack([P] * 4)
    est = make("meg", 2.0, k=k).partial_fit_dense(Xs[:1])
    for _ in range(3):
        w = est.parameter_eigenvalues_
        assert np.array_equal(w[-2:], [1.0, 1.0])
        np.testing.assert_allclose(w[:4], 0.25, rtol=1e-12)
        W = est.parameter_matrix()
        np.testing.assert_allclose(W, P + (np.eye(n) - P) / 4, rtol=0, atol=1e-12)
        est.partial_fit_dense(Xs[:1])
    np.testing.assert_allclose(est.cumulative_gain_, 2 * 0.5 + 3 * 2, rtol=1e-12)
    Wref, gain, _, _ = reference("meg", Xs, k, 2.0, dense=True)
    np.testing.assert_allclose(est.parameter_matrix(), Wref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.cumulative_gain_, gain, rtol=1e-12)


@pytest.mark.parametrize("rotate", [False, True])
def test_gd_reaches_a_projection(rotate):
    # n = 3, k = 1, eta = 10, x = e_0: W_1 + 10 e_0 e_0^T has eigenvalues
    # (10 + 1/3, 1/3, 1/3), whose projection is (1, 0, 0): W = e_0 e_0^T
    Q = _rotation(3, 3) if rotate else np.eye(3)
    x = Q[:, 0]
    est = make("gd", 10.0, k=1).partial_fit(x[None])
    realized = est.realized_gain_
    est.partial_fit(np.tile(x, (2, 1)))
    w = est.parameter_eigenvalues_
    np.testing.assert_allclose(w, [0, 0, 1], rtol=0, atol=1e-12)
    assert np.count_nonzero(w == 0) == 2
    W = est.parameter_matrix()
    np.testing.assert_allclose(W, np.outer(x, x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(W @ W, W, rtol=0, atol=1e-12)
    for _ in range(10):
        np.testing.assert_allclose(est.sample_projection(), np.outer(x, x), rtol=0, atol=1e-12)
    # from then on the played projection is W itself: realized = expected
    np.testing.assert_allclose(est.cumulative_gain_, 1 / 3 + 2, rtol=1e-12)
    np.testing.assert_allclose(est.realized_gain_ - realized, 2, rtol=1e-12)
    weights, bases = est.mixture_decomposition()
    assert len(weights) == 1 and weights[0] == pytest.approx(1.0, abs=1e-12)


def test_gd_reaches_a_projection_dense():
    # a dense instance that is itself a rank-2 projection P: with eta = 10,
    # W_1 + 10 P = 10.5 P + 0.5 (I - P) projects onto exactly P
    Q = _rotation(5, 4)
    P = Q[:, :2] @ Q[:, :2].T
    P = (P + P.T) / 2
    est = make("gd", 10.0, k=2).partial_fit_dense(np.stack([P, P]))
    w = est.parameter_eigenvalues_
    np.testing.assert_allclose(w, [0, 0, 0, 1, 1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.parameter_matrix(), P, rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.sample_projection(), P, rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.cumulative_gain_, 2 * 2 / 5 + 2, rtol=1e-12)


# == 9. found in review ===================================================================

@pytest.mark.parametrize("v, k, expected", [
    ([1e17, 1e17, 1e17 + 16], 2, [0.5, 0.5, 1.0]),
    ([2.0 ** 53, 2.0 ** 53, 2.0 ** 53 + 2, 0.0], 2, [0.5, 0.5, 1.0, 0.0]),
    ([-1e300, 1e300, 1e300, 0.0], 1, [0.0, 0.5, 0.5, 0.0]),      # differences overflow
])
def test_euclidean_projection_ties_beyond_2_to_the_53(v, k, expected):
    # hi + 1 rounds back to hi there: the window must be taken on differences
    np.testing.assert_array_equal(project_capped_simplex(v, k), expected)


def test_meg_auto_keeps_its_bound_when_the_scale_grows_inside_an_epoch():
    # tiny instances then large ones inside one epoch: a rate that shrinks
    # with the running max scale let W commit to the tiny direction (regret
    # 486 against a "bound" of 178); a run tuned to a scale restarts when the
    # scale more than doubles, and the bound holds
    X = np.zeros((2047, 2))
    X[:1535, 0] = np.sqrt(1e-3)
    X[1535:, 1] = 1.0
    est = MatrixEGPCA(1, random_state=0).partial_fit(X)
    assert 0 < est.regret_ <= est.regret_bound()
    assert est.regret_ < 50            # observed 26, as when the switch meets an epoch
    epochs = powers_of_two_between(2, 2048)
    assert est.n_restarts_ == epochs + 1       # one restart for the new scale
    # the bound's extra term covers such restarts whatever the stream
    for seed in range(3):
        rng = np.random.default_rng(seed)
        Y = rng.normal(size=(600, 5)) * np.exp(rng.uniform(-8, 8, size=(600, 1)))
        est = MatrixEGPCA(2, random_state=0).partial_fit(Y)
        assert 0 < est.regret_ <= est.regret_bound()


@pytest.mark.parametrize("algo", ["meg", "gd"])
def test_eta_change_mid_stream_rejected_and_fit_starts_afresh(algo):
    X = spiked(60, 8, seed=1)
    est = make(algo, 0.5).partial_fit(X[:30])
    before = snapshot(est)
    est.set_params(eta="auto")
    with pytest.raises(ValueError, match=names("eta")):
        est.partial_fit(X[30:])
    assert_unchanged(est, before)
    # a new fit may use the new rate, and its bound is the new rate's
    est.fit(X)
    fresh = make(algo, "auto").fit(X)
    assert est.regret_bound() == fresh.regret_bound()
    assert est.regret_ == fresh.regret_


def _failing_state(algo, where="d"):
    """A fresh state whose eigendecomposition every solver refuses (a NaN
    planted where no input can put one)."""
    state = make(algo, 0.5)._new_state(6, "vector", None)
    _kcapped._plant(state, where, 2, np.nan)
    return state


@pytest.mark.parametrize("algo", ["meg", "gd"])
def test_failed_first_call_leaves_no_fit(algo, monkeypatch):
    # an eta that overflows with the data is refused up front, naming eta
    est = make(algo, 1e300)
    with pytest.raises(ValueError, match=names("eta")):
        est.partial_fit(np.ones((3, 4)) * 1e5)
    assert not est.__sklearn_is_fitted__()
    # a failure of the state on a first call leaves the estimator unfitted;
    # on a later call, as it was (the copy the trials ran on is dropped)
    est = make(algo, 0.5)
    failing = _failing_state(algo)
    monkeypatch.setattr(type(est), "_new_state", lambda self, *a: failing)
    with pytest.raises(np.linalg.LinAlgError, match="LAPACK"):
        est.partial_fit(spiked(5, 6))
    assert not est.__sklearn_is_fitted__() and "_state" not in vars(est)
    monkeypatch.undo()
    est.partial_fit(spiked(5, 6))
    _kcapped._plant(est._state, "d", 2, np.nan)
    before = snapshot(est)
    with pytest.raises(np.linalg.LinAlgError, match="LAPACK"):
        est.partial_fit(spiked(5, 6, seed=1))
    assert_unchanged(est, before)


@pytest.mark.parametrize("algo", ["meg", "gd"])
@pytest.mark.parametrize("where", ["M", "d", "U"])
def test_an_eigendecomposition_every_solver_fails_leaves_the_estimator_as_it_was(algo, where):
    # Only a non-finite parameter makes the whole chain (dsyevd, dsyevr,
    # dsyev, Jacobi) fail: plant a NaN in the state object's live arrays and
    # run the real trial loop. The matrix itself is stored only with
    # full_every = 0; otherwise its eigendecomposition is, and the rank-one
    # update refuses the NaN, and so does the full decomposition it falls
    # back to. The call raises, and the state is the one before it.
    est = make(algo, 0.5)
    est._full_every = 0 if where == "M" else FULL_EVERY
    est.partial_fit(spiked(5, 6))
    _kcapped._plant(est._state, where, 2 if where == "d" else 13, np.nan)   # [2], [2, 1]
    before = snapshot(est)
    with pytest.raises(np.linalg.LinAlgError, match="LAPACK"):
        est.partial_fit(spiked(4, 6, seed=1))
    assert_unchanged(est, before)


@pytest.mark.parametrize("n", [1000, 2000, 4000])
def test_mixture_decomposition_exact_input_at_large_n(n):
    # an entry 1e-12 below 1 is not at the mean when w sums to k exactly:
    # snapping it there would move it by 1e-12
    w = np.zeros(n)
    w[0], w[1], w[2] = 1 - 1e-12, 1e-12, 1.0
    weights, subsets = mixture_decomposition(w, 2)
    check_mixture(w, 2, weights, subsets)


@pytest.mark.parametrize("algo", ["meg", "gd"])
def test_regret_bound_arguments(algo):
    est = make(algo).partial_fit(spiked(20, 6))
    assert est.regret_bound() == est.regret_bound(20)
    assert est.regret_bound(40) > est.regret_bound(20)
    assert np.isfinite(est.regret_bound(10 ** 30))      # closed form: no O(T) memory
    with pytest.raises(ValueError, match=names("n_trials")):
        est.regret_bound(-5)
    for bad in (2.7, True, "10"):
        with pytest.raises(TypeError, match=names("n_trials")):
            est.regret_bound(bad)


@pytest.mark.parametrize("algo", ["meg", "gd"])
def test_sample_projection_does_not_change_the_decisions(algo):
    X = spiked(120, 8, seed=2)
    a = make(algo).partial_fit(X[:60])
    b = make(algo).partial_fit(X[:60])
    for _ in range(5):
        a.sample_projection()
    a.partial_fit(X[60:])
    b.partial_fit(X[60:])
    assert_same_results(a, b)
    # and it is reproducible from the seed
    c = make(algo).partial_fit(X[:60])
    d = make(algo).partial_fit(X[:60])
    np.testing.assert_array_equal(c.sample_projection(), d.sample_projection())


def test_too_many_features_refused():
    # before anything is allocated (several n x n matrices: 8 GB each)
    with pytest.raises(ValueError, match="n_features"):
        MatrixGDPCA(1)._new_state((1 << 15) + 1, "vector", None)
