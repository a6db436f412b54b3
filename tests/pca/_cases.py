"""The contract cases both families of online PCA estimators share: the
bad-input tables and their checks, the accepted-input variants and the state
snapshots. The FPL estimators (test_contract.py) and the capped-simplex ones
(test_capped.py) validate their input with the same code
(streamfit.pca._common), so each case is written once, here; the cases one
family alone has stay in its own file.

Imported relatively (``from ._cases import ...``): pytest's importlib mode
(pyproject.toml) puts no test folder on sys.path."""
import copy
import pickle
import re

import numpy as np
import pytest

from streamfit.simulate import make_dense_stream, make_spiked_stream


def spiked(T=300, n=20, seed=0, n_spikes=3):
    return make_spiked_stream(T, n, n_spikes=n_spikes, random_state=seed)


def dense(T=40, n=10, seed=0, rank=5):
    return make_dense_stream(T, n, rank=rank, random_state=seed)


# -- state snapshots -------------------------------------------------------------

def snapshot(est):
    """The estimator's whole state: its state object's plain dict (arrays,
    counters, settings, bit generators; None before a fit), and the state of
    a Generator given as random_state (never drawn from)."""
    state = est.__dict__.get("_state")
    rng = getattr(est, "random_state", None)
    rng = copy.deepcopy(rng.bit_generator.state) if isinstance(rng, np.random.Generator) \
        else None
    return (None if state is None else state.to_state()), rng


def assert_unchanged(est, before):
    now = snapshot(est)
    assert now[1] == before[1], "the random_state Generator moved"
    if before[0] is None:
        assert now[0] is None, "a state appeared"
        return
    assert now[0].keys() == before[0].keys()
    for name, old in before[0].items():
        new = now[0][name]
        if isinstance(old, np.ndarray):
            assert new.dtype == old.dtype and new.shape == old.shape, name
            assert np.array_equal(new, old, equal_nan=True), name
        else:
            assert new == old or (new != new and old != old), name


def with_value(a, value, where=7):
    a = a.copy()
    a.flat[where] = value
    return a


def names(arg):
    """A regex that matches a message naming `arg` as a word."""
    return rf"(?<![\w.']){re.escape(arg)}(?![\w'])"


# -- bad input: a clear error naming the argument, state bit-identical -------------

def nonsymmetric(Xs):
    Xs = Xs.copy()
    Xs[3, 0, 1] += 0.1          # a later instance: the earlier ones are valid
    return Xs


def negative_diagonal(Xs):
    Xs = Xs.copy()
    Xs[2] = np.diag(np.r_[1.0, -1.0, np.ones(Xs.shape[1] - 2)])
    return Xs


def indefinite(Xs):
    # positive diagonal, eigenvalues 3 and -1: only a factorisation can tell
    Xs = Xs.copy()
    Xs[2] = np.eye(Xs.shape[1])
    Xs[2, 0, 1] = Xs[2, 1, 0] = 2.0
    return Xs


# name: (method, transform of the fresh data block, exception, argument named, detail);
# the blocks are 20 rows and 6 dense instances of the fitted n_features (20 for
# an estimator fitted with vectors, 10 for one fitted with dense instances).
# Bad vectors every stream estimator rejects (NaN, inf, shapes, dtypes) are
# streamfit.utils.estimator_checks.BAD_INPUT; these are the PCA family's own.
PCA_BAD_VECTOR = {
    "X-too-large": ("partial_fit", lambda X, Xs: X * 1e160, ValueError, "X", "too large"),
    # a fitted-with-vectors estimator given dense instances: the message should
    # name the argument (Xs) and say what was expected (vector instances)
    "Xs-after-vectors": ("partial_fit_dense", lambda X, Xs: Xs, ValueError, "Xs", "vector"),
}

BAD_DENSE = {
    "Xs-nan": ("partial_fit_dense", lambda X, Xs: with_value(Xs, np.nan), ValueError, "Xs",
               "NaN"),
    "Xs-inf": ("partial_fit_dense", lambda X, Xs: with_value(Xs, np.inf), ValueError, "Xs",
               "inf"),
    "Xs-2d": ("partial_fit_dense", lambda X, Xs: Xs[0], ValueError, "Xs", "3-dimensional"),
    "Xs-not-square": ("partial_fit_dense", lambda X, Xs: Xs[:, :, :-1], ValueError, "Xs",
                      "shape"),
    "Xs-n-features": ("partial_fit_dense", lambda X, Xs: Xs[:, :-1, :-1], ValueError, "Xs",
                      "9 features"),
    "Xs-non-symmetric": ("partial_fit_dense", lambda X, Xs: nonsymmetric(Xs), ValueError,
                         "Xs[3]", "not symmetric"),
    "Xs-negative-diagonal": ("partial_fit_dense", lambda X, Xs: negative_diagonal(Xs),
                             ValueError, "Xs[2]", "not positive semidefinite"),
    "Xs-indefinite": ("partial_fit_dense", lambda X, Xs: indefinite(Xs), ValueError,
                      "Xs[2]", "not positive semidefinite"),
    # ||X||_F is computed on scaled instances (1e160 is fine now): too large
    # means the cumulative matrix would overflow
    "Xs-too-large": ("partial_fit_dense", lambda X, Xs: Xs * 1e300, ValueError, "Xs",
                     "too large"),
    # the mirror image: vector rows to an estimator fitted with dense instances
    "X-after-dense": ("partial_fit", lambda X, Xs: X, ValueError, "X", "dense"),
}

# method, transform, argument named
REJECTED_FIT = {
    "fit-X-nan": ("fit", lambda X, Xs: with_value(X, np.nan), "X"),
    "fit-X-1d": ("fit", lambda X, Xs: X[0], "X"),
    "fit_dense-Xs-nan": ("fit_dense", lambda X, Xs: with_value(Xs, np.nan), "Xs"),
    "fit_dense-Xs-indefinite": ("fit_dense", lambda X, Xs: indefinite(Xs), "Xs"),
}


def two_calls(est, kind):
    """est after two calls (20 features, or dense 10 x 10), so that the state
    and the rng exist and have moved."""
    if kind == "vector":
        X = spiked(100, 20)
        return est.partial_fit(X[:40]).partial_fit(X[40:100])
    Xs = dense(30, 10)
    return est.partial_fit_dense(Xs[:10]).partial_fit_dense(Xs[10:30])


def _fresh_blocks(n, seed=1):
    """20 rows and 6 dense instances of n features: what a bad call changes."""
    return spiked(20, n, seed=seed), dense(6, n, seed=seed)


def _carry_on(kind, *ests):
    """Each of ests given the same further block (30 rows or 5 dense instances)."""
    n = ests[0].n_features_in_
    for est in ests:
        if kind == "vector":
            est.partial_fit(spiked(30, n, seed=2))
        else:
            est.partial_fit_dense(dense(5, n, seed=2))


def check_bad_data(prefit, kind, case):
    """The case (a row of BAD_VECTOR / BAD_DENSE) given to prefit(kind), a
    fitted estimator: the error names the argument and says the detail, the
    state is bit-identical, and the estimator carries on as if the call had
    never happened. Returns it and a second prefit(kind) after the same further
    block, for the caller to compare."""
    method, transform, exc, arg, detail = case
    est = prefit(kind)
    before = snapshot(est)
    # fresh blocks with the fitted n_features: rows of 20 / 10 x 10 instances
    # for the fitted kind, and the other kind's shape for the mixing cases
    X, Xs = _fresh_blocks(est.n_features_in_)
    with pytest.raises(exc) as info:
        getattr(est, method)(transform(X, Xs))
    msg = str(info.value)
    assert re.search(names(arg), msg), f"the message does not name {arg!r}: {msg!r}"
    assert detail in msg
    assert_unchanged(est, before)
    ref = prefit(kind)
    _carry_on(kind, est, ref)
    return est, ref


def check_bad_params(prefit, kind, params, exc, arg):
    """prefit(kind), a fitted estimator, with params set: its next call raises
    exc naming arg and leaves the state bit-identical; with the parameters put
    back it carries on as if nothing had happened. Returns it and a second
    prefit(kind) after the same further block, for the caller to compare."""
    est = prefit(kind)
    before = snapshot(est)
    good = est.get_params()
    est.set_params(**params)
    X, Xs = _fresh_blocks(est.n_features_in_)
    with pytest.raises(exc, match=names(arg)):
        est.partial_fit(X) if kind == "vector" else est.partial_fit_dense(Xs)
    assert_unchanged(est, before)
    est.set_params(**good)
    ref = prefit(kind)
    _carry_on(kind, est, ref)
    return est, ref


def check_rejected_fit(prefit, case):
    """DESIGN.md: "the estimator's state is unchanged after a rejected call";
    fit starts afresh, but only once its input has been accepted (as the
    quantile estimators' fit does). case: a row of REJECTED_FIT."""
    method, transform, arg = case
    est = prefit("dense" if method == "fit_dense" else "vector")
    before = snapshot(est)
    X, Xs = _fresh_blocks(est.n_features_in_)
    with pytest.raises(ValueError, match=names(arg)):
        getattr(est, method)(transform(X, Xs))
    assert_unchanged(est, before)


# -- determinism ------------------------------------------------------------------------

def check_same_seed_same_decisions(make_seeded, X, assert_same_results):
    """make_seeded(random_state) -> an unfitted estimator. Two seeded with 7,
    and one given a Generator seeded with 7 (the same source of randomness as
    the int seed), play the same components_ after each of uneven calls over X
    and end with the same results (compared by the family's
    assert_same_results). Returns the first."""
    a, b = make_seeded(7), make_seeded(7)
    g = make_seeded(np.random.default_rng(7))
    for lo, hi in ((0, 0), (0, 1), (1, 60), (60, len(X))):
        for est in (a, b, g):
            est.partial_fit(X[lo:hi])
        np.testing.assert_array_equal(a.components_, b.components_)
        np.testing.assert_array_equal(a.components_, g.components_)
    assert_same_results(a, b)
    assert_same_results(a, g)
    return a


# -- parameters ------------------------------------------------------------------------

def check_fresh_rejects(est, call, exc, arg, rng=None):
    """call(est) on a fresh estimator raises exc naming arg and leaves it
    unfitted, with no generator drawn from (nor rng, if given, advanced)."""
    before = copy.deepcopy(rng.bit_generator.state) if rng is not None else None
    with pytest.raises(exc, match=names(arg)):
        call(est)
    assert not est.__sklearn_is_fitted__() and not hasattr(est, "n_features_in_")
    assert "_state" not in vars(est)
    with pytest.raises(AttributeError, match="fit"):
        est.components_
    if rng is not None:
        assert rng.bit_generator.state == before


def check_shallow_copy(est, X, assert_same_results):
    """copy.copy(est) learning from X leaves est as it was (a copy owns its
    state object)."""
    twin = pickle.loads(pickle.dumps(est))
    copy.copy(est).partial_fit(X)
    assert_same_results(est.partial_fit(X), twin.partial_fit(X))


def check_not_mutated_nor_aliased(fits):
    """fits: (fit, data) pairs; fit(data) returns a fitted estimator. The
    data are left as they were, and the state is the state object's own:
    changing the data afterwards changes nothing."""
    for fit, data in fits:
        before = data.copy()
        est = fit(data)
        np.testing.assert_array_equal(data, before)
        state = snapshot(est)
        data[...] = 0.0
        assert_unchanged(est, state)


# Feeding a stream in these uneven blocks (empty calls included) must give the
# results of one call.
BOUNDS = (0, 0, 1, 38, 38, 39, 130, 200)


# -- accepted input types ------------------------------------------------------------

def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _strided_columns(a):
    # every other column of a wider buffer: neither C- nor F-contiguous
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],))
    wide[..., ::2] = a
    return wide[..., ::2]


# name: a -> (the variant given, the float64 array it must act as)
VARIANTS = {
    "float32": lambda a: (a.astype(np.float32), a.astype(np.float32).astype(np.float64)),
    "read-only": lambda a: (_readonly(a), a),
    "strided-rows": lambda a: (np.repeat(a, 2, axis=0)[::2], a),
    "strided-columns": lambda a: (_strided_columns(a), a),
    "fortran": lambda a: (np.asfortranarray(a), a),
    "lists": lambda a: (a.tolist(), a),
}


def variant_of(variant, data):
    """VARIANTS[variant](data), checked to be the layout its name says."""
    data_in, data_ref = VARIANTS[variant](data)
    if variant.startswith("strided"):
        assert not data_in.flags.c_contiguous and not data_in.flags.f_contiguous
    if variant == "read-only":
        assert not data_in.flags.writeable
    return data_in, data_ref
