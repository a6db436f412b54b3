"""Sparse rows (issue 43): CSR blocks and sparse or hashed dict rows in mode
"single" at O(nnz) a row, the same fit as the same rows given dense.

Agreement with the dense path is to 1e-12 (relative), not bit for bit: a
sparse row's dot product sums its non-zeros in order, the dense kernel sums
every column in its unrolled order, so the two differ in the last bits and
the difference then propagates through the stream. The statistical
schedule's d differs by design between the two (n_features + 1 for dense
rows, as it always was; the mean stored non-zeros + 1 for sparse rows), so
under it a sparse block agrees with its dense copy when its rows store every
column; every other schedule agrees on any rows. Within the sparse path, a
block and the same rows one by one, and a pickle resumed mid-stream, are
bit-identical.
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from streamfit import OnlineQuantileRegressor
from streamfit.kernels import LinearSGD

RTOL = 1e-12


def sparse_stream(n=4000, d=60, density=0.15, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=rng,
                  data_rvs=rng.standard_normal)
    beta = np.zeros(d)
    beta[:5] = [1.5, -2.0, 0.5, 1.0, -1.0]
    y = X @ beta + 1.0 + rng.standard_t(3, n)
    return X, np.asarray(y, dtype=np.float64), beta


def fit_blocks(est, X, y, block=1000):
    for a in range(0, X.shape[0], block):
        est.partial_fit(X[a:a + block], y[a:a + block])
    return est


def assert_close(dense, sparse):
    cd, cs = np.atleast_2d(dense.coef_), np.atleast_2d(sparse.coef_)
    scale = np.max(np.abs(cd))
    assert scale > 0
    assert np.max(np.abs(cd - cs)) <= RTOL * scale
    bd, bs = np.atleast_1d(dense.intercept_), np.atleast_1d(sparse.intercept_)
    assert np.max(np.abs(bd - bs)) <= RTOL * max(1.0, np.max(np.abs(bd)))


CONFIGS = [
    {"schedule": "constant"},
    {"schedule": "constant", "average": True},
    {"schedule": "inverse_time", "average": True},
    {"schedule": "constant", "fit_intercept": False},
    {"schedule": "constant", "average": True, "drift": "restart"},
    {"schedule": "constant", "tau": [0.1, 0.5, 0.9]},
    {"schedule": "inverse_time", "tau": [0.1, 0.5, 0.9], "average": True},
]


def _ids(kw):
    return ",".join(f"{k}={v}" for k, v in kw.items())


@pytest.mark.parametrize("kw", CONFIGS, ids=_ids)
def test_sparse_block_matches_its_dense_copy(kw):
    X, y, _ = sparse_stream()
    dense = fit_blocks(OnlineQuantileRegressor(**kw), X.toarray(), y)
    sparse = fit_blocks(OnlineQuantileRegressor(**kw), X, y)
    assert sparse.n_samples_seen_ == dense.n_samples_seen_ == X.shape[0]
    assert_close(dense, sparse)
    Xt, _, _ = sparse_stream(n=300, seed=1)
    pd_, ps = dense.predict(Xt.toarray()), sparse.predict(Xt)
    np.testing.assert_allclose(ps, pd_, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kw", [{}, {"average": True}, {"average": True, "drift": "restart"},
                                {"fit_intercept": False}, {"tau": [0.1, 0.5, 0.9]},
                                {"tau": [0.1, 0.5, 0.9], "average": True}], ids=_ids)
def test_statistical_schedule_on_sparse_rows_storing_every_column(kw):
    # (every column stored: the sparse d is n_features + 1, the dense one)
    rng = np.random.default_rng(4)
    n, d = 5000, 12
    Xd = rng.standard_normal((n, d))
    y = Xd @ np.linspace(-1, 1, d) + 1.0 + rng.standard_t(3, n)
    dense = fit_blocks(OnlineQuantileRegressor(**kw), Xd, y)
    sparse = fit_blocks(OnlineQuantileRegressor(**kw), sp.csr_matrix(Xd), y)
    assert_close(dense, sparse)


def test_statistical_schedule_d_is_the_sparse_rows_size():
    # hashed-like rows: 2^16 columns, 10 non-zeros a row. With d the width
    # the schedule would still be in its warm-up (a window of 2.5 d rows);
    # with d the rows' size it reaches the model.
    rng = np.random.default_rng(6)
    n, width, k = 20_000, 2 ** 16, 10
    cols = np.sort(np.stack([rng.choice(width, k, replace=False) for _ in range(n)]), axis=1)
    cols[:, 0] = rng.integers(0, 5, n)          # one of 5 signal columns in each row
    cols = np.sort(cols, axis=1)
    vals = rng.standard_normal((n, k))
    X = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, n * k + 1, k)),
                      shape=(n, width))
    beta = np.array([2.0, -1.0, 1.5, -2.0, 0.5])
    y = X[:, :5] @ beta + rng.standard_t(3, n)
    est = fit_blocks(OnlineQuantileRegressor(average=True), X, y, block=5000)
    assert est.schedule_state_["phase"] >= 2
    err = np.linalg.norm(est.coef_[:5] - beta) / np.linalg.norm(beta)
    assert err < 0.2


def test_sparse_learns_the_model():
    # (a fit on sparse rows that ignored them, or updated the wrong
    # coordinates, would not find beta's support)
    X, y, beta = sparse_stream(n=40_000, density=0.1)
    est = fit_blocks(OnlineQuantileRegressor(0.5, average=True), X, y, block=10_000)
    err = np.linalg.norm(est.coef_ - beta) / np.linalg.norm(beta)
    assert err < 0.15
    assert abs(est.intercept_ - 1.0) < 0.15


@pytest.mark.parametrize("kw", [{}, {"average": True}, {"tau": [0.2, 0.8], "average": True}])
def test_block_and_rows_one_by_one_are_bit_identical(kw):
    X, y, _ = sparse_stream(n=1500)
    block = OnlineQuantileRegressor(**kw).partial_fit(X, y)
    rows = OnlineQuantileRegressor(**kw)
    for i in range(X.shape[0]):
        rows.partial_fit(X[i:i + 1], y[i:i + 1])
    assert np.array_equal(block.coef_, rows.coef_)
    assert np.array_equal(block.intercept_, rows.intercept_)
    one = OnlineQuantileRegressor(**kw)
    for i in range(X.shape[0]):
        one.learn_one(X[i], y[i])
    assert np.array_equal(block.coef_, one.coef_)


@pytest.mark.parametrize("kw", [{}, {"average": True}, {"average": True, "drift": "restart"}])
def test_pickle_mid_stream_resumes_bit_identically(kw):
    X, y, _ = sparse_stream(n=3000)
    whole = OnlineQuantileRegressor(**kw).partial_fit(X, y)
    half = OnlineQuantileRegressor(**kw).partial_fit(X[:1700], y[:1700])
    resumed = pickle.loads(pickle.dumps(half))
    resumed.partial_fit(X[1700:], y[1700:])
    assert np.array_equal(whole.coef_, resumed.coef_)
    assert whole.intercept_ == resumed.intercept_


def _bad_inputs(X):
    def with_data(value):
        B = X.copy()
        B.data[3] = value
        return B

    def unsorted():
        B = X.copy()
        i = int(np.flatnonzero(np.diff(B.indptr) >= 2)[0])
        a = B.indptr[i]
        B.indices[a], B.indices[a + 1] = B.indices[a + 1], B.indices[a]
        return B

    def repeated():
        B = X.copy()
        i = int(np.flatnonzero(np.diff(B.indptr) >= 2)[0])
        a = B.indptr[i]
        B.indices[a + 1] = B.indices[a]
        return B

    def negative():
        B = X.copy()
        B.indices[0] = -1
        return B

    return {"unsorted": unsorted(),
            "nan": (with_data(np.nan), ValueError), "inf": (with_data(np.inf), ValueError),
            "repeated indices": (repeated(), ValueError),
            "negative index": (negative(), ValueError),
            "wrong n_features": (sp.random(X.shape[0], X.shape[1] + 1, density=0.1,
                                           format="csr", random_state=0), ValueError)}


@pytest.mark.parametrize("what", ["nan", "inf", "repeated indices", "negative index",
                                  "wrong n_features"])
@pytest.mark.parametrize("kw", [{}, {"average": True}])
def test_bad_sparse_input_refused_naming_X_state_unchanged(what, kw):
    X, y, _ = sparse_stream(n=800)
    est = OnlineQuantileRegressor(**kw).partial_fit(X[:400], y[:400])
    before = pickle.dumps(est)
    bad, exc = _bad_inputs(X[400:])[what]
    state = est._state.copy()
    with pytest.raises(exc, match=r"\bX\b"):
        state.learn(bad, y[400:])           # (the state object's own check)
    assert pickle.dumps(state) == pickle.dumps(est._state)
    with pytest.raises(exc, match=r"\bX\b"):
        est.partial_fit(bad, y[400:])
    assert pickle.dumps(est) == before
    # and the stream goes on as if the call had not been made
    ref = pickle.loads(before).partial_fit(X[400:], y[400:])
    est.partial_fit(X[400:], y[400:])
    assert np.array_equal(est.coef_, ref.coef_)


def _bad_last_row(X, what):
    # X with its last row made bad (the learning loops check each row as
    # they come to it: every row before it has been applied when they do)
    B = X.copy()
    a, b = B.indptr[-2], B.indptr[-1]
    assert b - a >= 2
    if what in ("nan", "inf"):
        B.data[b - 1] = np.nan if what == "nan" else np.inf
    elif what == "unsorted":
        B.indices[a], B.indices[a + 1] = B.indices[a + 1], B.indices[a]
    elif what == "repeated":
        B.indices[a + 1] = B.indices[a]
    elif what == "negative":
        B.indices[a] = -1
    else:                       # a column past n_features (the matrix's shape says less)
        B.indices[b - 1] = X.shape[1] + 5
    return B


@pytest.mark.parametrize("what", ["nan", "inf", "unsorted", "repeated", "negative", "past"])
@pytest.mark.parametrize("kw", [{}, {"average": True}, {"scale": "online"},
                                {"tau": [0.2, 0.8], "average": True},
                                {"inference": True, "average": True}])
def test_bad_last_row_of_a_block_refuses_the_block_state_unchanged(what, kw):
    X, y, _ = sparse_stream(n=800)
    est = OnlineQuantileRegressor(**kw).partial_fit(X[:400], y[:400])
    state = est._state
    before = pickle.dumps(state)
    bad = _bad_last_row(X[400:], what)
    with pytest.raises(ValueError, match=r"\bX\b.*row 399\b"):
        state.learn(bad, y[400:])
    assert pickle.dumps(state) == before
    # a numerical failure in an earlier row does not hide the bad row: the
    # block is refused for its bad row, as when blocks were checked first
    big = bad.copy()
    big.data[big.indptr[10]] = 1e200           # ||x||^2 overflows in row 10
    with pytest.raises(ValueError, match=r"\bX\b.*row 399\b"):
        state.learn(big, y[400:])
    assert pickle.dumps(state) == before
    state.learn(X[400:], y[400:])
    ref = pickle.loads(before)
    ref.learn(X[400:], y[400:])
    assert pickle.dumps(state) == pickle.dumps(ref)


def test_unsorted_columns_sorted_by_the_estimator_refused_by_the_state_object():
    X, y, _ = sparse_stream(n=800)
    bad = _bad_inputs(X)["unsorted"]
    state = LinearSGD(X.shape[1])
    with pytest.raises(ValueError, match=r"X\.indices.*not sorted"):
        state.learn(bad, y)
    assert state.n_samples_seen == 0
    est = OnlineQuantileRegressor().partial_fit(bad, y)
    ref = OnlineQuantileRegressor().partial_fit(X, y)
    assert np.array_equal(est.coef_, ref.coef_)
    assert not bad.has_sorted_indices           # (the caller's matrix left as it was)


def test_state_object_refuses_int64_indices_naming_X():
    # (the estimators convert 64-bit indices that fit; the state object reads
    # 32-bit ones only)
    X, y, _ = sparse_stream(n=50)
    B = X.copy()
    B.indices = B.indices.astype(np.int64)
    B.indptr = B.indptr.astype(np.int64)
    state = LinearSGD(X.shape[1])
    with pytest.raises(TypeError, match=r"X\.indices"):
        state.learn(B, y)
    assert state.n_samples_seen == 0
    est = OnlineQuantileRegressor().partial_fit(B, y)
    ref = OnlineQuantileRegressor().partial_fit(X, y)
    assert np.array_equal(est.coef_, ref.coef_)


def test_other_formats_convert():
    X, y, _ = sparse_stream(n=600)
    ref = OnlineQuantileRegressor().partial_fit(X, y)
    for other in (X.tocsc(), X.tocoo(), sp.csr_array(X)):
        est = OnlineQuantileRegressor().partial_fit(other, y)
        assert np.array_equal(est.coef_, ref.coef_)


@pytest.mark.parametrize("mode", ["batch", "storage"])
def test_block_modes_take_sparse_blocks_densified(mode):
    X, y, _ = sparse_stream(n=2000)
    kw = {"mode": mode, "batch_size": 200}
    dense = OnlineQuantileRegressor(**kw).fit(X.toarray(), y)
    sparse = OnlineQuantileRegressor(**kw).fit(X, y)
    assert np.array_equal(dense.coef_, sparse.coef_)


def test_inference_above_its_size_refused_naming_inference():
    X = sp.random(10, 5000, density=0.001, format="csr", random_state=0)
    y = np.zeros(10)
    # (average=True: without it inference is refused for another reason)
    est = OnlineQuantileRegressor(inference=True, average=True)
    with pytest.raises(ValueError, match="inference=True keeps .*SPARSE_INFERENCE_MAX"):
        est.partial_fit(X, y)
    # at the hashed widths of issue 43 the sums cannot even be allocated (2^20
    # columns: 4 TiB): the error names inference and the limit, not "work space"
    X = sp.random(10, 2 ** 20, density=1e-5, format="csr", random_state=0)
    with pytest.raises(MemoryError, match=r"inference=True .*SPARSE_INFERENCE_MAX"):
        est.partial_fit(X, y)
    assert not hasattr(est, "coef_")


# -- the sparse scaler ---------------------------------------------------------

def test_sparse_scaler_learns_badly_scaled_features():
    # scale="online" on sparse rows: each feature's root mean square of its
    # non-zero values, uncentred (centring would make every row dense). On
    # features whose scales span 1e-2..1e2 the unscaled fit is lost and the
    # scaled one finds the model (as the dense scaler does on dense rows).
    rng = np.random.default_rng(1)
    n, d = 60_000, 40
    X = sp.random(n, d, density=0.2, format="csr", random_state=rng,
                  data_rvs=rng.standard_normal)
    sc = np.logspace(-2, 2, d)
    X = sp.csr_matrix(X @ sp.diags(sc))
    beta = np.zeros(d)
    beta[::4] = rng.standard_normal(10) / sc[::4]
    y = X @ beta + 1.0 + rng.standard_t(3, n)

    def err(**kw):
        est = fit_blocks(OnlineQuantileRegressor(**kw), X, y, block=10_000)
        return np.linalg.norm((est.coef_ - beta) * sc) / np.linalg.norm(beta * sc), est

    plain, _ = err()
    scaled, est = err(scale="online")
    assert plain > 0.5
    assert scaled < 0.1
    assert abs(est.intercept_ - 1.0) < 0.1


@pytest.mark.parametrize("average", [False, True])
def test_sparse_scaler_block_rows_and_pickle_bit_identical(average):
    X, y, _ = sparse_stream(n=2000)
    kw = {"scale": "online", "average": average}
    block = OnlineQuantileRegressor(**kw).partial_fit(X, y)
    one = OnlineQuantileRegressor(**kw)
    for i in range(X.shape[0]):
        one.learn_one(X[i], y[i])
    half = pickle.loads(pickle.dumps(OnlineQuantileRegressor(**kw).partial_fit(X[:900], y[:900])))
    half.partial_fit(X[900:], y[900:])
    for other in (one, half):
        assert np.array_equal(block.coef_, other.coef_)
        assert block.intercept_ == other.intercept_


def test_scaler_kind_fixed_by_the_first_rows():
    X, y, _ = sparse_stream(n=400)
    est = OnlineQuantileRegressor(scale="online").partial_fit(X[:200], y[:200])
    before = pickle.dumps(est)
    with pytest.raises(ValueError, match="scale='online'.*sparse rows"):
        est.partial_fit(X[200:].toarray(), y[200:])
    assert pickle.dumps(est) == before
    dense = OnlineQuantileRegressor(scale="online").partial_fit(X[:200].toarray(), y[:200])
    with pytest.raises(ValueError, match="scale='online'.*dense rows"):
        dense.partial_fit(X[200:], y[200:])


# -- hashed dict rows ------------------------------------------------------------

def dict_rows(n, seed):
    rng = np.random.default_rng(seed)
    cities = ["Lyon", "Paris", "Oslo", "Lima", "Kyiv"]
    rows, ys = [], []
    for i in range(n):
        row = {"load": float(rng.standard_normal()), "city": cities[i % 5],
               f"user{int(rng.integers(0, 200))}": 1.0}
        if i % 3 == 0:
            row["late"] = float(rng.exponential())
        rows.append(row)
        ys.append(2.0 * row["load"] + (1.0 if row["city"] == "Oslo" else 0.0)
                  + float(rng.standard_normal()))
    return rows, np.array(ys)


def test_hash_rows_match_feature_hasher():
    from sklearn.feature_extraction import FeatureHasher

    from streamfit._kernels._quantile import hash_rows

    rows, _ = dict_rows(500, 0)
    rows.append({"é-ünïcode": 2.5, "zero": 0.0, "b": True})
    for n in (2 ** 4, 2 ** 18):
        ours = hash_rows(rows, n)
        theirs = FeatureHasher(n_features=n).transform(rows)
        theirs.sort_indices()
        assert (ours != theirs).nnz == 0
        assert np.array_equal(ours.toarray(), theirs.toarray())


@pytest.mark.parametrize("average", [False, True])
def test_hashed_dicts_learn_as_feature_hasher_rows(average):
    from sklearn.feature_extraction import FeatureHasher

    rows, y = dict_rows(2000, 1)
    n = 2 ** 12
    hashed = OnlineQuantileRegressor(average=average, hashing=n)
    for x, t in zip(rows, y):
        hashed.learn_one(x, t)
    H = FeatureHasher(n_features=n).transform(rows)
    ref = OnlineQuantileRegressor(average=average, hashing=n).partial_fit(H, y)
    assert np.array_equal(hashed.coef_, ref.coef_)
    assert hashed.intercept_ == ref.intercept_
    assert hashed.predict_one(rows[0]) == pytest.approx(float(ref.predict(H[:1])[0]),
                                                        rel=1e-12)


def test_dict_rows_without_hashing_refused_naming_hashing():
    est = OnlineQuantileRegressor()
    with pytest.raises(TypeError, match="hashing"):
        est.learn_one({"a": 1.0}, 1.0)
    with pytest.raises(ValueError, match="hashing"):
        OnlineQuantileRegressor(hashing=2 ** 10).partial_fit(np.ones((3, 5)), np.ones(3))


def test_river_adapter_hashing_takes_new_features():
    pytest.importorskip("river")
    from streamfit.river import QuantileRegressor

    rows, y = dict_rows(3000, 2)
    fixed = QuantileRegressor(tau=0.5)
    hashed = QuantileRegressor(tau=0.5, hashing=2 ** 14)
    for x, t in zip(rows, y):
        # (the unhashed adapter takes numbers only: the city one-hot)
        fixed.learn_one({**{k: v for k, v in x.items() if k != "city"},
                         "city=" + x["city"]: 1.0}, t)
        hashed.learn_one(x, t)
    # the first row fixed the unhashed columns: the later users and cities
    # were dropped; hashed, every feature has its column
    assert len(fixed.weights) == len(rows[0])
    assert len(hashed.weights) > len(fixed.weights) + 100
    assert hashed.predict_one({"load": 0.0, "city": "Oslo"}) > hashed.predict_one({"load": 0.0, "city": "Lyon"}) + 0.5
