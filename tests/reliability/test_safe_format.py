"""The safe model format (issue 40): streamfit.save / streamfit.load.

- Round trips: the loaded estimator continues bit for bit as the saved one
  (every estimator with a state object -- quantile, multi-quantile,
  batch/storage with rows pending, averaged with inference, drift, least
  squares, interval, PCA, low-rank -- through its to_state/from_state),
  through a path (written atomically) or a
  file object; parameters with schedules, tuples and lists come back
  equal; what cannot be stored safely is refused at save time, naming the
  parameter.
- Hostile files (_safe_format_cases.py, in child processes: a crash or a
  hang would be recorded, not suffered): each attack is refused with a
  ValueError naming what is wrong, no pickle in the file runs, and no load
  allocates the sizes a file declares (traced peak under 4 MiB, against
  declared sizes of 2 GiB to 2^127 bytes; the largest peak, 2.6 MiB, is
  zipfile reading the directory of a file with 5,000 members).
- Random edits of a valid file (1,200: bytes flipped, zeroed, cut, inserted):
  refused with a ValueError, or loaded and usable.
"""
import io
import os
import pickle

import numpy as np
import pytest

import streamfit
from streamfit import (FollowTheLeaderPCA, OnlineIntervalRegressor, OnlineLeastSquaresRegressor,
                       OnlineQuantileRegressor, PerturbedLeaderPCA)
from streamfit.schedules import (ConstantSchedule, FunctionSchedule, InverseTimeSchedule,
                                 StatisticalSchedule)

from ._isolated import child_env, returned, run_cases
from ._safe_format_cases import names

PEAK = 4 << 20


def _rows(n=300, d=6, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d))


def _roundtrip(est):
    buffer = io.BytesIO()
    streamfit.save(est, buffer)
    return streamfit.load(io.BytesIO(buffer.getvalue()))


def test_a_loaded_estimator_continues_bit_for_bit():
    X = _rows()
    for split in (1, 7, 150):
        ftl = FollowTheLeaderPCA(3).partial_fit(X[:split])
        loaded = _roundtrip(ftl)
        assert type(loaded) is FollowTheLeaderPCA and loaded.get_params() == ftl.get_params()
        assert loaded.n_trials_ == split and loaded.n_features_in_ == 6
        np.testing.assert_array_equal(loaded.components_, ftl.components_)
        a, b = ftl.partial_fit(X[split:]), loaded.partial_fit(X[split:])
        np.testing.assert_array_equal(a.components_, b.components_)
        assert a.cumulative_gain_ == b.cumulative_gain_ and a.regret_ == b.regret_


# every estimator whose learnt state is a state object, in its variants
STATE_OBJECT_ESTIMATORS = {
    "quantile": lambda: OnlineQuantileRegressor(0.3),
    "multi-quantile": lambda: OnlineQuantileRegressor([0.1, 0.5, 0.9]),
    "batch, rows pending": lambda: OnlineQuantileRegressor(0.5, mode="batch", batch_size=64),
    "storage": lambda: OnlineQuantileRegressor(0.7, mode="storage", batch_size=40,
                                               schedule=StatisticalSchedule(Ca=2.0)),
    "averaged, inference": lambda: OnlineQuantileRegressor(0.5, average=True, inference=True),
    "drift restarts": lambda: OnlineQuantileRegressor(0.5, average=True, drift="restart"),
    "online scaling": lambda: OnlineQuantileRegressor(0.5, scale="online"),
    "constant steps": lambda: OnlineQuantileRegressor(0.5, schedule=ConstantSchedule(0.05)),
    "least squares": lambda: OnlineLeastSquaresRegressor(schedule=InverseTimeSchedule(0.5)),
    "interval": lambda: OnlineIntervalRegressor(alpha=0.2),
    "interval, PID": lambda: OnlineIntervalRegressor(alpha=0.1, method="pid"),
}


def _stream(n=3000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    # a level shift halfway: the drift test has something to find
    y = X @ np.linspace(-1, 1, d) + 3.0 + rng.standard_t(3, n) + 4.0 * (np.arange(n) > n // 2)
    return X, y


def _learnt(est):
    """The whole learnt state as bytes by field (bit-identical or not)."""
    out = {}
    stack = [("", est._state.to_state())]
    while stack:
        prefix, d = stack.pop()
        for key, value in d.items():
            if isinstance(value, dict):
                stack.append((f"{prefix}{key}.", value))
            elif isinstance(value, np.ndarray):
                out[prefix + key] = (value.dtype.str, value.shape, value.tobytes())
            else:
                out[prefix + key] = repr(value)
    return out


@pytest.mark.parametrize("name", sorted(STATE_OBJECT_ESTIMATORS))
def test_state_objects_continue_bit_for_bit(name):
    X, y = _stream()
    for split in (1, 1237, 2000):
        est = STATE_OBJECT_ESTIMATORS[name]().partial_fit(X[:split], y[:split])
        loaded = _roundtrip(est)
        assert type(loaded) is type(est) and repr(loaded) == repr(est)
        assert type(loaded._state) is type(est._state)
        assert _learnt(loaded) == _learnt(est)
        # the same rows after: the same state, the same predictions, bit for bit
        for a, b in ((X[split:2500], y[split:2500]), (X[2500:], y[2500:])):
            est.partial_fit(a, b)
            loaded.partial_fit(a, b)
        for xi, yi in zip(X[:3], y[:3]):        # and one row at a time
            est.learn_one(xi, yi)
            loaded.learn_one(xi, yi)
        assert _learnt(loaded) == _learnt(est), (name, split)
        np.testing.assert_array_equal(loaded.predict(X[:50]), est.predict(X[:50]))
        assert loaded.n_samples_seen_ == est.n_samples_seen_ == 3003
    if name == "drift restarts":
        assert est.n_drift_restarts_ > 0          # the drift test's state was exercised


def test_state_object_feature_names_come_back():
    pd = pytest.importorskip("pandas")
    X, y = _stream(300, 3)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    for est in (OnlineQuantileRegressor(0.5), OnlineIntervalRegressor()):
        est.fit(frame, y)
        loaded = _roundtrip(est)
        assert list(loaded.feature_names_in_) == ["a", "b", "c"]
        np.testing.assert_array_equal(loaded.predict(frame), est.predict(frame))
        with pytest.raises(ValueError, match="feature names"):
            loaded.partial_fit(frame.rename(columns={"a": "z"}), y)


def test_a_file_whose_params_contradict_its_state_is_refused():
    # the learnt state belongs to its tau and mode: a file whose parameters
    # say otherwise is refused naming the setting, not loaded half-consistent
    import json
    import zipfile

    X, y = _stream(200)
    buffer = io.BytesIO()
    streamfit.save(OnlineQuantileRegressor(0.3).fit(X, y), buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as zf:
        items = [(i.filename, zf.read(i)) for i in zf.infolist()]
    manifest = json.loads(dict(items)["manifest.json"])
    manifest["params"]["tau"] = 0.9
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name, payload in items:
            zf.writestr(name, json.dumps(manifest) if name == "manifest.json" else payload)
    with pytest.raises(ValueError, match=r"params do not fit the state: tau changed from 0.3 "
                                         r"to 0.9"):
        streamfit.load(io.BytesIO(out.getvalue()))


def test_dense_instances_and_feature_names_come_back():
    pd = pytest.importorskip("pandas")
    X = _rows(40, 4)
    frame = pd.DataFrame(X, columns=list("abcd"))
    ftl = FollowTheLeaderPCA(2).partial_fit(frame)
    loaded = _roundtrip(ftl)
    assert list(loaded.feature_names_in_) == list("abcd")
    np.testing.assert_array_equal(loaded.transform(frame), ftl.transform(frame))
    dense = np.einsum("ti,tj->tij", X, X)
    ftl = FollowTheLeaderPCA(2).partial_fit_dense(dense[:20])
    loaded = _roundtrip(ftl)
    np.testing.assert_array_equal(ftl.partial_fit_dense(dense[20:]).components_,
                                  loaded.partial_fit_dense(dense[20:]).components_)


def test_paths_are_replaced_whole(tmp_path):
    X = _rows(50)
    ftl = FollowTheLeaderPCA(2).partial_fit(X)
    path = tmp_path / "model.sfm"
    streamfit.save(ftl, path)
    streamfit.save(ftl, str(path))          # over an existing file: replaced whole
    assert sorted(os.listdir(tmp_path)) == ["model.sfm"]       # no temporary left
    np.testing.assert_array_equal(streamfit.load(path).components_, ftl.components_)
    with open(path, "rb") as f:
        np.testing.assert_array_equal(streamfit.load(f).components_, ftl.components_)

    # a refused save leaves the file there as it was
    with pytest.raises(TypeError):
        streamfit.save(OnlineQuantileRegressor(schedule=FunctionSchedule(abs)), path)
    np.testing.assert_array_equal(streamfit.load(path).components_, ftl.components_)
    assert sorted(os.listdir(tmp_path)) == ["model.sfm"]


def test_unfitted_estimators_save_their_parameters():
    for est in [OnlineQuantileRegressor((0.1, 0.9), mode="batch", batch_size=32,
                                       schedule=StatisticalSchedule(Ca=10.0, b0=0.5)),
                OnlineQuantileRegressor(0.3, schedule=ConstantSchedule(0.01)),
                OnlineQuantileRegressor([0.2, 0.8], schedule=InverseTimeSchedule(2.0)),
                PerturbedLeaderPCA(2, sigma=0.5, random_state=7), FollowTheLeaderPCA(1)]:
        loaded = _roundtrip(est)
        assert type(loaded) is type(est)
        # equal, and of the same types (a tuple stays a tuple, a list a list)
        assert repr(loaded.get_params(deep=True)) == repr(est.get_params(deep=True))


def test_what_cannot_be_stored_safely_is_refused_at_save_time():
    X = _rows(100)
    with pytest.raises(TypeError, match="FunctionSchedule.*holds code"):
        streamfit.save(OnlineQuantileRegressor(schedule=FunctionSchedule(lambda t: 0.1)),
                       io.BytesIO())
    with pytest.raises(TypeError, match=r"params\['random_state'\] is a Generator"):
        streamfit.save(PerturbedLeaderPCA(2, random_state=np.random.default_rng(0)),
                       io.BytesIO())

    class Mine(FollowTheLeaderPCA):
        pass

    with pytest.raises(TypeError, match="one of streamfit's estimators"):
        streamfit.save(Mine(2), io.BytesIO())
    with pytest.raises(TypeError, match="one of streamfit's estimators"):
        streamfit.save(object(), io.BytesIO())
    # (every public estimator holds a state object once fitted: saved by it)
    fpl = PerturbedLeaderPCA(2, random_state=0).partial_fit(X)
    assert "_state" in vars(fpl)
    np.testing.assert_array_equal(_roundtrip(fpl).components_, fpl.components_)
    # a schedule of the user's own in the state object: not plain data
    with pytest.raises(TypeError, match="state cannot be stored safely"):
        est = OnlineQuantileRegressor().fit(X, X[:, 0])
        est._state.configure(schedule=FunctionSchedule(lambda t: 0.1))
        streamfit.save(est, io.BytesIO())
    with pytest.raises(TypeError, match="file must be"):
        streamfit.save(FollowTheLeaderPCA(1), 42)
    with pytest.raises(TypeError, match="file must be"):
        streamfit.load(b"PK")


# what some refusals must say (every one is checked for its type and prefix)
WORDS = {
    "npy declares 2^40 floats": "declares shape (1099511627776,) of float64",
    "member declares 4 GiB": "beyond the end of the file",
    "zip bomb (deflated 200 MB of zeros)": "compressed",
    "object array (pickled payload)": "has dtype |O",
    "pickled member as .npy": "is not a .npy array",
    "path ../": "'../evil.npy'",
    "duplicate manifest": "named twice",
    "overlapping members": "overlaps",
    "manifest not UTF-8": "not UTF-8",
    "manifest nested 100,000 deep": "nested too deeply",
    "NaN token": "NaN is not a JSON number",
    "estimator os.system": "estimator is 'os.system'",
    "qr: state_object os.system": "state_object is 'os.system'; OnlineQuantileRegressor "
                                  "holds a LinearSGD",
    "qr: state_object a dotted path": "state_object is 'streamfit._kernels._quantile.LinearSGD'",
    "qr: pickled member as coef": "state['coef'] (arrays/1.npy): is not a .npy array",
    "qr: object array as coef": "has dtype |O",
    "qr: a schedule object by name": "settings 'schedule' must be a schedule name",
    "qr: state format 99": "this LinearSGD state has format 99",
    "qr: coef NaN": "state field 'coef' holds NaN or inf",
    "qr: params tau 0.9": "tau changed from 0.3 to 0.9",
}


def test_hostile_files_are_refused_without_running_or_allocating(tmp_path):
    marker = tmp_path / "ran"
    attacks = names()
    assert len(attacks) >= 90
    outcomes = run_cases("_safe_format_cases", "attack", attacks, timeout=60, workers=2,
                         env=child_env(STREAMFIT_TEST_MARKER=str(marker)))
    failures = []
    for name, _, v in returned(attacks, outcomes, failures):
        if not v["refused"] or v["type"] != "ValueError" or \
                not v["message"].startswith("streamfit.load: <BytesIO>: "):
            failures.append(f"{name}: {v}")
        elif v["peak"] > PEAK or v["marker"]:
            failures.append(f"{name}: peak {v['peak']} bytes, marker {v['marker']}")
        elif WORDS.get(name, "") not in v["message"]:
            failures.append(f"{name}: the message does not say {WORDS[name]!r}: "
                            f"{v['message']}")
    assert not failures, "\n".join(failures)
    assert set(WORDS) <= set(attacks)
    assert not marker.exists()          # no pickle in any file ran


def test_random_edits_are_refused_or_loaded_and_usable():
    seeds = list(range(1200))
    outcomes = run_cases("_safe_format_cases", "random_edit", seeds, timeout=60, workers=2)
    failures, loaded = [], 0
    for seed, _, v in returned(seeds, outcomes, failures):
        if v["refused"] and v["type"] != "ValueError":
            failures.append(f"{seed}: {v}")
        elif not v["refused"]:
            loaded += 1
            if not v["used"]:
                failures.append(f"{seed}: loaded but unusable")
        if v["peak"] > PEAK:
            failures.append(f"{seed}: peak {v['peak']}")
    assert not failures, "\n".join(failures[:20])
    assert loaded < len(seeds) // 4         # most edits break the file and are refused


def test_pickle_stays_for_trusted_use():
    # the estimators still pickle (joblib, Dask): the documented trusted path
    ftl = FollowTheLeaderPCA(2).partial_fit(_rows(30))
    again = pickle.loads(pickle.dumps(ftl))
    np.testing.assert_array_equal(again.components_, ftl.components_)


def test_the_low_rank_state_object_continues_bit_for_bit():
    # the generic path on a second family: OnlineLowRankQuantileRegressor's
    # LowRankState, saved by to_state and loaded by from_state
    from streamfit import OnlineLowRankQuantileRegressor

    rng = np.random.default_rng(0)
    M = rng.standard_normal((12, 2)) @ rng.standard_normal((2, 9))
    idx = np.column_stack([rng.integers(0, 12, 6000), rng.integers(0, 9, 6000)])
    y = M[idx[:, 0], idx[:, 1]] + 0.1 * rng.standard_t(2, 6000)
    for split in (1, 2345):
        est = OnlineLowRankQuantileRegressor(rank=2, shape=(12, 9)).partial_fit(idx[:split],
                                                                                y[:split])
        loaded = _roundtrip(est)
        assert type(loaded._state) is type(est._state)
        assert _learnt(loaded) == _learnt(est)
        est.partial_fit(idx[split:], y[split:])
        loaded.partial_fit(idx[split:], y[split:])
        assert _learnt(loaded) == _learnt(est)
        np.testing.assert_array_equal(loaded.coef_, est.coef_)
        assert loaded.n_samples_seen_ == est.n_samples_seen_ == 6000
