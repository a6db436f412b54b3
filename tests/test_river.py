"""streamfit.river: river's own estimator checks on the three adapters, the
same results as the wrapped streamfit estimators, the column mapping of dict
rows, pickling mid-stream, pipelines, bad input, and river as an optional
dependency."""
import pickle
import subprocess
import sys

import numpy as np
import pytest

river = pytest.importorskip("river", reason="river is not installed (pip install "
                            "'streamfit[river]')")
pd = pytest.importorskip("pandas")

from river import checks, preprocessing  # noqa: E402

from streamfit import (OnlineLeastSquaresRegressor, OnlineQuantileRegressor,  # noqa: E402
                       PerturbedLeaderPCA)
from streamfit.river import LeastSquaresRegressor, QuantileRegressor  # noqa: E402
from streamfit.river import PerturbedLeaderPCA as RiverPCA  # noqa: E402
from streamfit.simulate import make_linear_stream, make_spiked_stream  # noqa: E402

ADAPTERS = (QuantileRegressor, LeastSquaresRegressor, RiverPCA)


def _river_checks():
    """(id, model, check) for every check river's yield_checks gives each
    adapter, under each of its _unit_test_params."""
    cases = []
    for cls in ADAPTERS:
        for i, params in enumerate(cls._unit_test_params()):
            model = cls(**params)
            seen = {}
            for check in checks.yield_checks(model):
                name = check.__name__
                seen[name] = seen.get(name, 0) + 1
                suffix = "" if seen[name] == 1 else f"-{seen[name]}"
                cases.append(pytest.param(model, check, id=f"{cls.__name__}-{i}-{name}{suffix}"))
    return cases


RIVER_CHECKS = _river_checks()


def test_river_checks_cover_the_dataset_checks():
    # the checks that feed rows (emerging and disappearing features, pickling,
    # learn_many against learn_one) run on every adapter, not only the
    # structural ones
    names = {p.id.split("-", 2)[2] for p in RIVER_CHECKS}
    for name in ("check_emerging_features", "check_disappearing_features",
                 "check_radically_disappearing_features", "check_pickling",
                 "check_learn_many_matches_learn_one", "check_shuffle_features_no_impact",
                 "check_bounded_memory_growth", "check_predict_one_before_any_learn"):
        assert name in names
    assert "check_predict_many_matches_predict_one" in names
    assert "check_transform_many_matches_transform_one" in names
    for cls in ADAPTERS:
        assert cls(**next(cls._unit_test_params()))._unit_test_skips() == set()


@pytest.mark.parametrize("model, check", RIVER_CHECKS)
def test_river_estimator_checks(model, check):
    # as river.checks.check_estimator runs them: each on a fresh clone
    check(model.clone())


# -- the same results as the wrapped estimators ----------------------------------

def _dicts(X, prefix="x"):
    # zero-padded names sort in column order
    return [{f"{prefix}{j:02d}": v for j, v in enumerate(row)} for row in X.tolist()]


@pytest.fixture(scope="module")
def stream():
    X, y, beta = make_linear_stream(3000, 12, tau=0.3, random_state=3)
    return X, y, _dicts(X)


@pytest.mark.parametrize("adapter, estimator", [
    (QuantileRegressor(tau=0.3), OnlineQuantileRegressor(tau=0.3)),
    (QuantileRegressor(tau=0.3, average=True), OnlineQuantileRegressor(tau=0.3, average=True)),
    (QuantileRegressor(tau=0.7, scale="online", fit_intercept=False),
     OnlineQuantileRegressor(tau=0.7, scale="online", fit_intercept=False)),
    (LeastSquaresRegressor(average=True), OnlineLeastSquaresRegressor(average=True)),
], ids=["quantile", "quantile-average", "quantile-scale", "least-squares"])
def test_learn_one_equals_the_wrapped_estimator(stream, adapter, estimator):
    X, y, dicts = stream
    adapter = adapter.clone()
    preds = []
    for x, target in zip(dicts, y.tolist()):
        preds.append(adapter.predict_one(x))          # prequential: before the update
        adapter.learn_one(x, target)
    estimator.fit(X, y)
    np.testing.assert_array_equal(adapter.estimator.coef_, estimator.coef_)
    assert adapter.estimator.intercept_ == estimator.intercept_
    assert adapter.columns == tuple(dicts[0])
    assert adapter.weights == dict(zip(adapter.columns, estimator.coef_.tolist()))
    assert adapter.intercept == estimator.intercept_
    assert preds[0] == 0.0
    np.testing.assert_allclose([adapter.predict_one(x) for x in dicts[:50]],
                               estimator.predict(X[:50]), rtol=1e-12, atol=1e-12)
    # prequential predictions are those of the estimator fed the rows before
    mid = OnlineQuantileRegressor(**estimator.get_params()) if isinstance(
        estimator, OnlineQuantileRegressor) else OnlineLeastSquaresRegressor(
        **estimator.get_params())
    mid.fit(X[:1000], y[:1000])
    np.testing.assert_allclose(preds[1000], mid.predict(X[1000:1001])[0], rtol=1e-12)


@pytest.mark.parametrize("adapter", [QuantileRegressor(tau=0.3), LeastSquaresRegressor()],
                         ids=["quantile", "least-squares"])
def test_learn_many_equals_learn_one(stream, adapter):
    X, y, dicts = stream
    one, many = adapter.clone(), adapter.clone()
    for x, target in zip(dicts, y.tolist()):
        one.learn_one(x, target)
    frame = pd.DataFrame(dicts)
    for a in range(0, 3000, 700):                 # uneven mini-batches
        many.learn_many(frame.iloc[a:a + 700], pd.Series(y[a:a + 700]))
    np.testing.assert_array_equal(one.estimator.coef_, many.estimator.coef_)
    assert one.intercept == many.intercept
    out = many.predict_many(frame.iloc[10:20])
    assert isinstance(out, pd.Series) and list(out.index) == list(range(10, 20))
    np.testing.assert_allclose(out.to_numpy(), [one.predict_one(x) for x in dicts[10:20]],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("adapter", [QuantileRegressor(tau=0.3), RiverPCA(n_components=2, seed=0)],
                         ids=["quantile", "pca"])
def test_learn_many_reads_each_frame_by_its_own_columns(stream, adapter):
    # The adapters remember the last columns seen in the model's order (row
    # slices share them): frames in another order, with a column missing or
    # one too many, and integer frames, met between such slices, are each
    # read by their own columns -- the model is learn_one's over the same rows
    X, y, dicts = stream
    one, many = adapter.clone(), adapter.clone()
    supervised = one._supervised
    frame = pd.DataFrame(dicts)
    cols = list(frame.columns)
    shapes = [lambda f: f, lambda f: f[cols[::-1]], lambda f: f.drop(columns=[cols[3]]),
              lambda f: f.assign(extra=7.0), lambda f: f.round().astype(np.int64)]
    for i, a in enumerate(range(0, 1500, 100)):
        block = shapes[i % len(shapes)](frame.iloc[a:a + 100])
        if supervised:
            many.learn_many(block, pd.Series(y[a:a + 100]))
        else:
            many.learn_many(block)
        for x, target in zip(block.to_dict("records"), y[a:a + 100].tolist()):
            x = {k: float(v) for k, v in x.items()}
            one.learn_one(x, target) if supervised else one.learn_one(x)
    if supervised:
        np.testing.assert_array_equal(one.estimator.coef_, many.estimator.coef_)
        assert one.intercept == many.intercept
        preds = many.predict_many(frame.iloc[:50][cols[::-1]])
        np.testing.assert_allclose(preds.to_numpy(), [one.predict_one(x) for x in dicts[:50]],
                                   rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(one.estimator.components_, many.estimator.components_)
    assert many.columns == tuple(cols)
    # a frame with a new column is refused under new_features="raise", the
    # model unchanged, after slices of the same frame were read
    strict = adapter.clone({"new_features": "raise"})
    wide = frame.assign(extra=1.0)
    strict.learn_many(frame.iloc[:100], pd.Series(y[:100])) if supervised else \
        strict.learn_many(frame.iloc[:100])
    before = pickle.dumps(strict)
    with pytest.raises(ValueError, match="'extra'.*not among the model's columns"):
        strict.learn_many(wide.iloc[100:200], pd.Series(y[100:200])) if supervised else \
            strict.learn_many(wide.iloc[100:200])
    assert pickle.dumps(strict) == before


def test_pca_equals_the_wrapped_estimator():
    S = make_spiked_stream(400, 8, n_spikes=2, random_state=0)
    dicts = _dicts(S, "f")
    one = RiverPCA(n_components=2, seed=4)
    for x in dicts:
        one.learn_one(x)
    est = PerturbedLeaderPCA(n_components=2, random_state=4).partial_fit(S)
    np.testing.assert_array_equal(one.estimator.components_, est.components_)
    assert one.estimator.cumulative_gain_ == est.cumulative_gain_
    z = one.transform_one(dicts[7])
    assert list(z) == [0, 1]
    np.testing.assert_allclose(list(z.values()), est.transform(S[7:8])[0], rtol=1e-12)
    # mini-batches: the same trials
    many = RiverPCA(n_components=2, seed=4)
    frame = pd.DataFrame(dicts)
    many.learn_many(frame.iloc[:150])
    many.learn_many(frame.iloc[150:])
    np.testing.assert_array_equal(many.estimator.components_, est.components_)
    out = many.transform_many(frame.iloc[:5])
    assert list(out.columns) == [0, 1]
    np.testing.assert_allclose(out.to_numpy(), est.transform(S[:5]), rtol=1e-12)
    assert set(one.components) == {0, 1} and set(one.components[0]) == set(dicts[0])


def test_before_the_first_row():
    x = {"a": 1.0, "b": 2.0}
    assert QuantileRegressor().predict_one(x) == 0.0
    assert LeastSquaresRegressor().weights == {}
    assert RiverPCA(n_components=3).transform_one(x) == {0: 0.0, 1: 0.0, 2: 0.0}
    frame = pd.DataFrame([x, x], index=[5, 6])
    assert QuantileRegressor().predict_many(frame).tolist() == [0.0, 0.0]
    assert RiverPCA(n_components=2).transform_many(frame).shape == (2, 2)
    assert QuantileRegressor().estimator is None and QuantileRegressor().columns is None


# -- columns ---------------------------------------------------------------------

def test_key_order_does_not_matter(stream):
    X, y, dicts = stream
    a, b = QuantileRegressor(), QuantileRegressor()
    rng = np.random.default_rng(0)
    for x, target in zip(dicts[:500], y.tolist()):
        a.learn_one(x, target)
        keys = list(x)
        rng.shuffle(keys)
        b.learn_one({k: x[k] for k in keys}, target)
    assert a.columns == b.columns
    np.testing.assert_array_equal(a.estimator.coef_, b.estimator.coef_)


def test_missing_keys_read_as_zero_and_new_keys_are_ignored(stream):
    X, y, dicts = stream
    model = LeastSquaresRegressor()
    for x, target in zip(dicts[:500], y.tolist()):
        model.learn_one(x, target)
    w, b = model.weights, model.intercept
    assert model.predict_one({"x03": 2.0}) == pytest.approx(2.0 * w["x03"] + b, rel=1e-14)
    # a key outside the columns changes nothing, in learning or predicting
    ref = pickle.loads(pickle.dumps(model))
    model.learn_one({**dicts[500], "extra": 1e6}, y[500])
    ref.learn_one(dicts[500], y[500])
    np.testing.assert_array_equal(model.estimator.coef_, ref.estimator.coef_)
    assert model.predict_one({**dicts[0], "extra": 5.0}) == model.predict_one(dicts[0])
    assert "extra" not in model.columns


def test_declared_features(stream):
    X, y, dicts = stream
    names = list(dicts[0])[::-1]                  # an order of the user's choosing
    model = QuantileRegressor(tau=0.3, features=names)
    sparse = {k: v for k, v in dicts[0].items() if k in names[:3]}
    model.learn_one(sparse, y[0])                 # the first row lacks most features
    assert model.columns == tuple(names)
    for x, target in zip(dicts[1:], y[1:].tolist()):
        model.learn_one(x, target)
    est = OnlineQuantileRegressor(tau=0.3).fit(
        np.vstack([[sparse.get(k, 0.0) for k in names], X[1:, ::-1]]), y)
    np.testing.assert_array_equal(model.estimator.coef_, est.coef_)


def test_new_features_raise_leaves_the_model_unchanged(stream):
    X, y, dicts = stream
    model = QuantileRegressor(new_features="raise")
    for x, target in zip(dicts[:100], y.tolist()):
        model.learn_one(x, target)
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match="'extra'.*not among the model's columns"):
        model.learn_one({**dicts[100], "extra": 1.0}, y[100])
    with pytest.raises(ValueError, match="'extra'"):
        model.predict_one({**dicts[100], "extra": 1.0})
    with pytest.raises(ValueError, match="'extra'"):
        model.learn_many(pd.DataFrame([{**dicts[100], "extra": 1.0}]), pd.Series([y[100]]))
    assert pickle.dumps(model) == before
    model.learn_one({"x00": 1.0}, 0.5)            # missing keys are fine


# -- pickling, pipelines ---------------------------------------------------------

@pytest.mark.parametrize("adapter", [QuantileRegressor(tau=0.3, average=True),
                                     LeastSquaresRegressor(), RiverPCA(n_components=2, seed=0)],
                         ids=["quantile", "least-squares", "pca"])
def test_pickle_mid_stream_resumes_bit_identically(stream, adapter):
    X, y, dicts = stream
    adapter = adapter.clone()
    supervised = adapter._supervised

    def learn(m, rows):
        for i in rows:
            m.learn_one(dicts[i], y[i]) if supervised else m.learn_one(dicts[i])

    learn(adapter, range(1200))
    copy = pickle.loads(pickle.dumps(adapter))
    learn(adapter, range(1200, 3000))
    learn(copy, range(1200, 3000))
    a, b = adapter.estimator, copy.estimator
    if supervised:
        np.testing.assert_array_equal(b.coef_, a.coef_)
        assert (b.intercept_, b.n_samples_seen_, b.cumulative_loss_, b.schedule_state_) == \
            (a.intercept_, a.n_samples_seen_, a.cumulative_loss_, a.schedule_state_)
        assert copy.predict_one(dicts[5]) == adapter.predict_one(dicts[5])
    else:
        np.testing.assert_array_equal(b.components_, a.components_)
        assert (b.cumulative_gain_, b.n_trials_) == (a.cumulative_gain_, a.n_trials_)
        assert copy.transform_one(dicts[5]) == adapter.transform_one(dicts[5])


def test_pipeline_with_standard_scaler():
    X, y, beta = make_linear_stream(6000, 10, tau=0.5, random_state=1)
    X = X * np.arange(1, 11) + 3.0                # scales and offsets for the scaler to fix
    dicts, ys = _dicts(X), y.tolist()
    pipe = preprocessing.StandardScaler() | QuantileRegressor(average=True)
    for x, target in zip(dicts[:5000], ys):
        pipe.learn_one(x, target)
    held = [pipe.predict_one(x) for x in dicts[5000:]]
    base = np.median(y[:5000])
    mae = np.mean(np.abs(y[5000:] - held))
    assert mae < 0.2 * np.mean(np.abs(y[5000:] - base))
    # the pipeline pickles mid-stream and resumes the same
    copy = pickle.loads(pickle.dumps(pipe))
    for x, target in zip(dicts[5000:5100], ys[5000:]):
        pipe.learn_one(x, target)
        copy.learn_one(x, target)
    assert copy.predict_one(dicts[0]) == pipe.predict_one(dicts[0])
    # mini-batches through the pipeline
    frame = pd.DataFrame(dicts)
    batch = preprocessing.StandardScaler() | QuantileRegressor(average=True)
    for a in range(0, 5000, 500):
        batch.learn_many(frame.iloc[a:a + 500], pd.Series(y[a:a + 500]))
    pred = batch.predict_many(frame.iloc[5000:])
    assert np.mean(np.abs(y[5000:] - pred.to_numpy())) < 0.2 * np.mean(np.abs(y[5000:] - base))


def test_pca_in_a_pipeline():
    S = make_spiked_stream(800, 6, n_spikes=2, random_state=2)
    dicts = _dicts(S, "f")
    target = (S @ np.arange(6.0)).tolist()
    pipe = preprocessing.StandardScaler() | RiverPCA(n_components=3, seed=0) | \
        LeastSquaresRegressor()
    for x, t in zip(dicts, target):
        pipe.learn_one(x, t)
    assert isinstance(pipe.predict_one(dicts[0]), float)
    assert set(pipe.steps["LeastSquaresRegressor"].columns) == {0, 1, 2}


def test_concurrent_learners_lose_no_row(stream):
    # two threads feed one model from its first row on: one estimator is
    # made, every row is learnt, and predictions are of the final state
    import threading

    X, y, dicts = stream
    for _ in range(5):
        model = LeastSquaresRegressor()
        start = threading.Barrier(2)

        def feed(rows):
            start.wait()
            for i in rows:
                model.learn_one(dicts[i], y[i])
                model.predict_one(dicts[i])

        threads = [threading.Thread(target=feed, args=(range(k, 1000, 2),)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert model.estimator.n_samples_seen_ == 1000
        est = model.estimator
        assert model.predict_one(dicts[3]) == pytest.approx(
            float(X[3] @ est.coef_ + est.intercept_), rel=1e-12)


# -- bad input -------------------------------------------------------------------

@pytest.mark.parametrize("cls", ADAPTERS)
def test_bad_rows_leave_the_model_unchanged(stream, cls):
    X, y, dicts = stream
    model = cls()
    supervised = model._supervised

    def learn(x, t=1.0):
        model.learn_one(x, t) if supervised else model.learn_one(x)

    # a refused first row fixes no columns
    with pytest.raises(ValueError, match="'x01'.*NaN or infinity"):
        learn({**dicts[0], "x01": float("nan")})
    assert model.columns is None and model.estimator is None
    for x, t in zip(dicts[:200], y.tolist()):
        learn(x, t)
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match="'x04'.*NaN or infinity"):
        learn({**dicts[0], "x04": float("inf")})
    with pytest.raises(TypeError, match="'x02'.*not numbers"):
        learn({**dicts[0], "x02": "seven"})
    with pytest.raises(TypeError, match="x must be a dict"):
        learn([1.0, 2.0])
    bad = pd.DataFrame([dicts[0], {**dicts[1], "x05": np.nan}])
    with pytest.raises(ValueError, match="'x05'.*NaN or infinity"):
        model.learn_many(bad, pd.Series([1.0, 2.0])) if supervised else model.learn_many(bad)
    with pytest.raises(TypeError, match="pandas DataFrame"):
        model.learn_many(X[:2], y[:2]) if supervised else model.learn_many(X[:2])
    text = pd.DataFrame([dicts[0], {**dicts[1], "x06": "seven"}])
    with pytest.raises(TypeError, match="'x06'.*not numbers"):
        model.learn_many(text, pd.Series([1.0, 2.0])) if supervised else model.learn_many(text)
    twice = pd.DataFrame([[1.0, 2.0]], columns=["x00", "x00"])
    with pytest.raises(ValueError, match="repeated column"):
        model.learn_many(twice, pd.Series([1.0])) if supervised else model.learn_many(twice)
    infer = model.predict_one if supervised else model.transform_one
    with pytest.raises(ValueError, match="'x03'.*NaN or infinity"):
        infer({**dicts[0], "x03": float("nan")})
    if supervised:
        with pytest.raises(ValueError, match="y"):
            model.learn_one(dicts[0], float("nan"))
        with pytest.raises((TypeError, ValueError), match="y"):
            model.learn_one(dicts[0], None)
    assert pickle.dumps(model) == before


def test_bad_parameters_are_named_at_the_first_row():
    x = {"a": 1.0, "b": 2.0}
    for model, name in [(QuantileRegressor(tau=1.5), "tau"),
                        (QuantileRegressor(tau=[0.1, 0.9]), "tau"),
                        (QuantileRegressor(new_features="keep"), "new_features"),
                        (LeastSquaresRegressor(features=["a", "a"]), "features"),
                        (LeastSquaresRegressor(features="ab"), "features"),
                        (RiverPCA(n_components=3), "n_components"),
                        (RiverPCA(noise="pink"), "noise")]:
        with pytest.raises((TypeError, ValueError), match=name):
            model.learn_one(x, 1.0) if model._supervised else model.learn_one(x)
        assert model.estimator is None and model.columns is None


# -- river is optional -----------------------------------------------------------

def test_importing_streamfit_does_not_import_river():
    code = "import sys, streamfit, streamfit.quantile, streamfit.pca; print('river' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_without_river_the_import_error_says_how_to_install():
    # sys.modules[name] = None makes `import name` raise ImportError, as in a
    # virtual environment without river
    code = ("import sys; sys.modules['river'] = None\n"
            "try:\n    import streamfit.river\n"
            "except ImportError as exc:\n    print('ERR', exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "pip install 'streamfit[river]'" in done.stdout
