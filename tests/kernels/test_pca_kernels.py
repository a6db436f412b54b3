"""streamfit.kernels' online PCA half from a second package's point of view:
the estimators' own state objects (LeaderState, CappedState, DropoutState)
driven directly give the estimators' states bit for bit, and check what
enters them; the public low-level API -- goe, TopK, the capped-simplex
functions -- composed into Follow the Perturbed Leader's inner loop
reproduces PerturbedLeaderPCA's projections; TopK on any symmetric matrix;
pickling; argument checks."""
import math
import pickle

import numpy as np
import pytest

from streamfit import kernels
from streamfit.kernels import TopK, goe

SQRT_2_OVER_PI = 0.7978845608028654


def fpl_tolerance(tol, L, sigma, n, k, t_next):
    """The Krylov gap tolerance PerturbedLeaderPCA documents, tol c / (2
    sqrt(t)), R_T <= c sqrt(T) the bound at sigma for vector instances of
    ||x||^2 <= L: c = a / sigma + sqrt(2) k sqrt(n) sigma, a = L^2 sqrt(2/pi) (here
    as mantissa and exponent, the kernel's overflow-free evaluation)."""
    m, e = math.frexp(L)
    a = m * m * SQRT_2_OVER_PI
    c = math.ldexp(a / math.ldexp(sigma, -e), e) + math.sqrt(2.0) * k * math.sqrt(n) * sigma
    return tol * c / (2.0 * math.sqrt(t_next))


@pytest.mark.parametrize("n, k, sigma, seed", [(60, 3, 0.25, 0), (120, 5, 0.125, 3),
                                               (40, 2, 0.5, 7)])
def test_fpl_inner_loop_from_the_kernels_matches_the_estimator(n, k, sigma, seed):
    """Fixed noise S_t = X_<t + sqrt(t) sigma N: one GOE draw, a rank-one and a
    scaled-noise update per trial, a warm-started solve with the trial's row
    as the hint -- the projections PerturbedLeaderPCA plays, bit for bit."""
    from streamfit import PerturbedLeaderPCA
    from streamfit.simulate import make_spiked_stream

    X = make_spiked_stream(150, n, n_spikes=k, random_state=seed)
    tol = 0.01
    est = PerturbedLeaderPCA(k, sigma=sigma, random_state=seed).partial_fit(X[:0])

    # --- the second package: streamfit.kernels only ---
    rng = np.random.default_rng(seed)
    N = goe(n, 1.0, rng)                          # one draw per run
    topk = TopK(n, k)
    topk.update(matrix=N, scale=sigma)            # S_1 = sigma N
    topk.solve()                                  # the first decision, exact
    np.testing.assert_array_equal(topk.vectors, est.components_)
    s, L, gain = sigma, 0.0, 0.0
    for t, x in enumerate(X, start=1):
        V = topk.vectors
        gain += float(np.sum((V @ x) ** 2))       # play V_t, see x_t
        L = max(L, float(np.einsum("i,i->", x, x)))
        topk.update(vector=x)                     # S += x x^T
        s_new = math.sqrt(t + 1.0) * sigma
        topk.update(matrix=N, scale=s_new - s)    # sqrt(t) sigma N -> sqrt(t + 1) sigma N
        s = s_new
        topk.solve(fpl_tolerance(tol, L, sigma, n, k, t + 1.0), hint=x, seed=t)
        # --- the estimator, one trial behind ---
        est.partial_fit(x[None])
        np.testing.assert_array_equal(topk.vectors, est.components_, err_msg=f"trial {t}")
    assert topk.stats["products"] > topk.stats["solves"]       # Krylov did the work
    assert topk.stats["products"] == est.solver_stats_["products"]
    np.testing.assert_allclose(gain, est.cumulative_gain_, rtol=1e-12)
    np.testing.assert_array_equal(topk.matrix, est.perturbed_matrix())


def test_topk_tracks_a_symmetric_matrix_under_low_rank_updates():
    """Any symmetric matrix (not PSD, not FPL's): rank-one, rank-m, dense and
    scaled updates; each warm-started solve within its gap tolerance of
    LAPACK's top k."""
    rng = np.random.default_rng(1)
    n, k = 150, 4
    A = rng.standard_normal((n, n))
    A = (A + A.T) / 2
    topk = TopK(n, k)
    topk.update(matrix=A)
    values, vectors = topk.solve()
    ref = A.copy()
    np.testing.assert_allclose(values, np.linalg.eigvalsh(ref)[::-1][:k], rtol=1e-12)
    for step in range(30):
        kind = step % 3
        if kind == 0:
            x = rng.standard_normal(n)
            topk.update(vector=x, scale=0.3)
            ref += 0.3 * np.outer(x, x)
        elif kind == 1:
            R = rng.standard_normal((3, n))
            topk.update(rows=R, scale=-0.1)
            ref -= 0.1 * R.T @ R
        else:
            B = rng.standard_normal((n, n)) * 0.01
            B = B + B.T
            topk.update(matrix=B, scale=2.0)
            ref += 2.0 * B
        tol = 1e-6
        values, vectors = topk.solve(tol)
        exact = np.linalg.eigvalsh(ref)[::-1][:k]
        captured = np.einsum("ij,jk,ik->", vectors, ref, vectors)
        assert exact.sum() - captured <= 2 * tol + 1e-9 * abs(exact).sum()
        np.testing.assert_allclose(vectors @ vectors.T, np.eye(k), atol=1e-12)
        np.testing.assert_allclose(values.sum(), captured, rtol=1e-9)
    np.testing.assert_allclose(topk.matrix, ref, atol=1e-12)
    assert topk.stats["products"] > 0 and topk.stats["kept"] == 0


def test_topk_pickles_and_resumes_bit_identically():
    rng = np.random.default_rng(2)
    n = 80
    topk = TopK(n, 3)
    topk.update(matrix=goe(n, 1.0, rng))
    topk.solve()
    xs = rng.standard_normal((10, n))
    for x in xs[:5]:
        topk.update(vector=x)
        topk.solve(1e-3, hint=x)
    twin = pickle.loads(pickle.dumps(topk))
    for obj in (topk, twin):
        for x in xs[5:]:
            obj.update(vector=x)
            obj.solve(1e-3, hint=x)
    np.testing.assert_array_equal(twin.vectors, topk.vectors)
    np.testing.assert_array_equal(twin.values, topk.values)
    assert twin.stats == topk.stats
    # a pickle records the API version its layout belongs to
    state = topk.__getstate__()
    assert state["api_version"] == kernels.API_VERSION
    stale = TopK.__new__(TopK)
    with pytest.raises(ValueError, match="API version"):
        stale.__setstate__({**state, "api_version": 0})


def test_goe_from_a_bit_generator_and_into_out():
    bitgen = np.random.PCG64(5)
    out = np.empty((64, 64))
    N = goe(64, 2.0, bitgen, out=out)
    assert N is out and np.array_equal(N, N.T)
    ref = goe(64, 2.0, np.random.default_rng(np.random.PCG64(5)))
    np.testing.assert_array_equal(N, ref)
    # the bit generator moved on by exactly the n(n+1)/2 normals
    z = np.random.Generator(np.random.PCG64(5)).standard_normal(64 * 65 // 2 + 1)
    assert np.random.Generator(bitgen).standard_normal() == z[-1]


@pytest.mark.parametrize("call, exc, name", [
    (lambda: goe(-1), ValueError, "n"),
    (lambda: goe(3, -1.0), ValueError, "sigma"),
    (lambda: goe(3, random_state="x"), TypeError, "random_state"),
    (lambda: goe(3, out=np.empty((3, 3), dtype=np.float32)), ValueError, "out"),
    (lambda: goe(3, out=np.empty((3, 6))[:, ::2]), ValueError, "out"),
    (lambda: TopK(0, 1), ValueError, "n"),
    (lambda: TopK(5, 6), ValueError, "k"),
    (lambda: TopK(5, 3, block=2), ValueError, "block"),
    (lambda: TopK(5, 1).update(), ValueError, "exactly one"),
    (lambda: TopK(5, 1).update(vector=np.ones(4)), ValueError, "vector"),
    (lambda: TopK(5, 1).update(rows=np.ones((2, 4))), ValueError, "rows"),
    (lambda: TopK(3, 1).update(matrix=np.triu(np.ones((3, 3)))), ValueError, "symmetric"),
    (lambda: TopK(3, 1).update(vector=[1.0, np.nan, 0.0]), ValueError, "vector"),
    (lambda: TopK(3, 1).update(vector=[1j, 0, 0]), TypeError, "vector"),
    (lambda: TopK(3, 1).solve(-1.0), ValueError, "tol"),
    (lambda: TopK(3, 1).solve(hint=np.ones(2)), ValueError, "hint"),
    (lambda: kernels.project_capped_simplex([1.0, 2.0], 3), ValueError, "k"),
    (lambda: kernels.mixture_decomposition([0.5, 0.5, 1.5], 2), ValueError, "w"),
    (lambda: kernels.systematic_sample([0.5, 0.5], 1, size=-1), ValueError, "size"),
    (lambda: kernels.default_block_size(10, 0), ValueError, "k"),
    (lambda: kernels.default_block_size(float("nan"), 2), TypeError, "n"),
    (lambda: kernels.default_max_iter(10, 0), ValueError, "b"),
    (lambda: kernels.default_max_iter(1e300, 2), TypeError, "n"),
])
def test_arguments_are_checked_naming_them(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def test_the_kernels_module_exports_the_pca_api():
    for name in ("goe", "TopK", "project_capped_simplex", "mixture_decomposition",
                 "systematic_sample", "default_block_size", "default_max_iter",
                 "LeaderState", "CappedState", "DropoutState"):
        assert name in kernels.__all__ and getattr(kernels, name).__doc__
    # the estimators' helpers are the same functions
    from streamfit import pca
    assert pca.project_capped_simplex is kernels.project_capped_simplex
    assert pca.mixture_decomposition is kernels.mixture_decomposition
    assert pca.systematic_sample is kernels.systematic_sample


# -- the state objects: what enters them is checked ----------------------------------------

STATE_OBJECTS = {
    "LeaderState": lambda: kernels.LeaderState(10, 2, random_state=0),
    "LeaderState-ftl": lambda: kernels.LeaderState(10, 2, noise="none"),
    "CappedState": lambda: kernels.CappedState(10, 2, algo="gd", random_state=0),
    "DropoutState": lambda: kernels.DropoutState(10, 2, random_state=0),
}


@pytest.mark.parametrize("name", sorted(STATE_OBJECTS))
def test_state_objects_are_the_estimators_own(name):
    """A library's loop over a state object's learn_one is the estimator's
    partial_fit, bit for bit; learn on the block too; and the object pickles,
    copies and resumes bit-identically."""
    from streamfit import DropoutPCA, FollowTheLeaderPCA, MatrixGDPCA, PerturbedLeaderPCA
    from streamfit.simulate import make_spiked_stream

    est = {"LeaderState": PerturbedLeaderPCA(2, random_state=0),
           "LeaderState-ftl": FollowTheLeaderPCA(2),
           "CappedState": MatrixGDPCA(2, random_state=0),
           "DropoutState": DropoutPCA(2, random_state=0)}[name]
    X = make_spiked_stream(100, 10, n_spikes=2, random_state=1)
    est.partial_fit(X)
    state, block = STATE_OBJECTS[name](), STATE_OBJECTS[name]()
    for x in X[:50]:
        state.learn_one(x)
    twin = pickle.loads(pickle.dumps(state))
    copied = state.copy()
    for obj in (state, twin, copied):
        obj.learn(X[50:])
    block.learn(X)
    for obj in (state, twin, copied, block):
        np.testing.assert_array_equal(obj.components_, est.components_)
        assert obj.n_trials_ == 100 and obj.cumulative_gain_ == est.cumulative_gain_
        a, b = obj.to_state(), est._state.to_state()
        assert a.keys() == b.keys()
        for key in a:
            assert np.array_equal(a[key], b[key]) if isinstance(a[key], np.ndarray) \
                else a[key] == b[key], key


# (field, value): edits of a state's plain dict the loader must refuse by name
STATE_EDITS = [("n", -1), ("n", 2.5), ("k", 11), ("t", -1), ("t", "3"), ("gain", np.nan),
               ("rng", "{}"), ("rng", None), ("seed_kind", "other"), ("V", np.zeros((3, 10))),
               ("S", np.full((10, 10), np.inf)), ("rows", np.zeros((64, 9))),
               ("pending", 64), ("topk_skip", 65), ("noise", "gaussian"), ("tol", -1.0),
               ("feature_names", ["a"]), ("extra", 1)]


@pytest.mark.parametrize("field, value", STATE_EDITS, ids=[f"{f}={v!r:.12}"
                                                          for f, v in STATE_EDITS])
def test_a_state_dict_edited_is_refused_naming_the_field(field, value):
    """The one loader of a state object (unpickling, and the safe model
    format) checks every field -- type, range, shape, finiteness,
    consistency -- and refuses anything off with a ValueError naming it."""
    state = kernels.LeaderState(10, 2, random_state=0)
    state.learn(np.eye(10)[:5])
    fields = state.to_state()
    fields[field] = value
    with pytest.raises(ValueError, match=field):
        kernels.LeaderState.from_state(fields)
    del fields[field]
    if field != "extra":
        with pytest.raises(ValueError, match=f"{field}.*missing"):
            kernels.LeaderState.from_state(fields)


def test_state_objects_check_their_input_naming_it():
    state = kernels.LeaderState(10, 2, random_state=0)
    for X, exc, words in ((np.ones((3, 9)), ValueError, "X has 9 features"),
                          (np.ones((3, 10), dtype=np.int64), TypeError, "X must be"),
                          (np.asfortranarray(np.ones((3, 10))), TypeError, "C-contiguous"),
                          (np.full((3, 10), np.nan), ValueError, "X contains NaN"),
                          (np.full((3, 10), 1e160), ValueError, "X is too large")):
        with pytest.raises(exc, match=words):
            state.learn(X)
    with pytest.raises(ValueError, match="Xs holds dense instances"):
        state.learn_dense(np.zeros((1, 10, 10)))
    with pytest.raises(ValueError, match="not symmetric"):
        kernels.LeaderState(3, 1, instances="dense").learn_dense(np.triu(np.ones((1, 3, 3))))
    with pytest.raises(ValueError, match="x has 3 features"):
        state.learn_one([1.0, 2.0, 3.0])
    assert state.n_trials_ == 0


def test_a_block_too_wide_for_krylov_is_solved_exactly_and_quietly(capfd):
    """With 2b > n the block and its residual directions do not fit in n
    dimensions: each solve is exact (LAPACK), not a Krylov attempt whose basis
    QR fails in dorgqr -- which printed "On entry to DORGQR parameter number
    2 had an illegal value" and counted a fallback every time."""
    rng = np.random.default_rng(4)
    n = 8
    A = rng.standard_normal((n, n))
    topk = TopK(n, 5)                              # block 8 > n / 2
    topk.update(matrix=A + A.T)
    topk.solve()
    for _ in range(3):
        x = rng.standard_normal(n)
        topk.update(vector=x)
        values, vectors = topk.solve(1e-3, hint=x)
        A = A + np.outer(x, x) / 2
        np.testing.assert_allclose(values, np.linalg.eigvalsh(A + A.T)[::-1][:5], rtol=1e-10)
    out, err = capfd.readouterr()
    assert "DORGQR" not in out + err
    assert topk.stats["products"] == 0 and topk.stats["fallbacks"] == 0
    assert topk.stats["solves"] == 4


def test_topk_update_that_would_overflow_is_refused_and_leaves_s_unchanged():
    # A finite x whose x x^T overflows would make S inf (and solve return inf
    # values, counting the block as kept): the update must refuse it.
    rng = np.random.default_rng(0)
    n = 420
    A = rng.standard_normal((n, n))
    topk = TopK(n, 3)
    topk.update(matrix=A + A.T)
    topk.solve()
    before = topk.matrix
    for kwargs in ({"vector": np.full(n, 1e300)},
                   {"rows": np.full((2, n), 1e200)},
                   {"matrix": np.full((n, n), 1e300), "scale": 1e10}):
        name = next(iter(kwargs))
        with pytest.raises(ValueError, match=f"overflow.*rescale {name}"):
            topk.update(**kwargs)
        np.testing.assert_array_equal(topk.matrix, before)
    values, _ = topk.solve(1e-6)
    assert np.isfinite(values).all() and topk.stats["kept"] == 0
    # large factors whose scaled term is finite are fine: (1e-300 * 1e200) * 1e200
    topk.update(vector=np.full(n, 1e200), scale=1e-300)
    assert np.isfinite(topk.matrix).all()


def test_topk_overflow_check_decides_on_the_result_not_on_its_bound():
    # max |S| + the term's bound overflows, the sum does not (the large
    # entries are in different places): accepted; then a real overflow is
    # refused and S kept
    topk = TopK(3, 1)
    topk.update(matrix=np.diag([1e307, 0.0, 0.0]))
    x = np.array([0.0, 1e154, 0.0])
    topk.update(vector=x)
    np.testing.assert_array_equal(topk.matrix.diagonal(), [1e307, 1e308, 0.0])
    with pytest.raises(ValueError, match="overflow"):
        topk.update(vector=x)
    np.testing.assert_array_equal(topk.matrix.diagonal(), [1e307, 1e308, 0.0])
    # and the bound survives pickling (an old pickle without it recomputes it)
    copy = pickle.loads(pickle.dumps(topk))
    with pytest.raises(ValueError, match="overflow"):
        copy.update(vector=x)
    state = topk.__getstate__()
    del state["_bound"]                 # a pickle from before the check
    old = TopK.__new__(TopK)
    old.__setstate__(state)
    with pytest.raises(ValueError, match="overflow"):
        old.update(vector=x)
    np.testing.assert_array_equal(old.matrix, topk.matrix)


@pytest.mark.parametrize("name, value", [("_V", lambda t: t._V.astype(bool)),
                                         ("_S", lambda t: t._S[:, :-1].copy()),
                                         ("_values", lambda t: list(t._values))])
def test_topk_arrays_replaced_are_refused_naming_them(name, value):
    """The arrays beside TopK's record, replaced by another dtype, shape or
    type: a ValueError naming the attribute at the next call."""
    topk = TopK(6, 2)
    topk.update(matrix=np.eye(6))
    topk.solve()
    setattr(topk, name, value(topk))
    with pytest.raises(ValueError, match=name):
        topk.solve(1e-8)
    with pytest.raises(ValueError, match=name):
        topk.update(vector=np.ones(6))


@pytest.mark.parametrize("edit, exc, name", [
    (lambda t: setattr(t, "k", 1e300), TypeError, "k"),
    (lambda t: setattr(t, "block", 99), ValueError, "block"),
    (lambda t: t._state.__setitem__("solves", -1_000_000), ValueError, "solves"),
    (lambda t: t._state.__setitem__("backoff", 65), ValueError, "backoff"),
])
def test_topk_sizes_and_record_set_out_of_range_are_refused_naming_them(edit, exc, name):
    """n, k, block, max_iter (public attributes) and the record's counters,
    set out of range between calls: the next call refuses them by name (a
    negative solve count would otherwise surface as an OverflowError naming
    nothing)."""
    topk = TopK(6, 2)
    topk.update(matrix=np.eye(6))
    topk.solve()
    edit(topk)
    with pytest.raises(exc, match=name):
        topk.solve()
    with pytest.raises(exc, match=name):
        topk.update(vector=np.ones(6))
