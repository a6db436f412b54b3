"""fit_groups on a two-process LocalCluster: the same models as routing each
partition's rows to their group's model in memory, no row moved, errors
naming the group, bad input refused."""
import dask.array as da  # noqa: F401 - dask.dataframe needs dask.array loaded alike
import numpy as np
import pytest
from sklearn.base import clone

distributed = pytest.importorskip("distributed")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from streamfit import (FollowTheLeaderPCA, OnlineQuantileRegressor,  # noqa: E402
                       PerturbedLeaderPCA)
from streamfit.dask import fit_groups  # noqa: E402

from .conftest import assert_same_state, by_value  # noqa: E402


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(3)
    n = 3000
    # groups of very different sizes; "rare" only in the last partition
    sensor = rng.choice(["a", "b", "c", "d"], size=n, p=[0.55, 0.3, 0.1, 0.05]).astype(object)
    sensor[-40:] = "rare"
    site = rng.integers(0, 2, n)
    X = rng.standard_normal((n, 3))
    scale = pd.Series(sensor).map({"a": 1.0, "b": 2.0, "c": -1.0, "d": 0.5, "rare": 3.0})
    y = scale.to_numpy() * X[:, 0] + X[:, 1] + rng.standard_t(3, n)
    df = pd.DataFrame(X, columns=["x0", "x1", "x2"])
    df.insert(0, "sensor", sensor)
    df.insert(1, "site", site)
    df["y"] = y
    return df


def in_memory(estimator, pieces, by, columns, y):
    models = {}
    for part in pieces:
        for key, rows in part.groupby(by, sort=False):
            model = models.setdefault(key, clone(estimator))
            model.partial_fit(rows[columns]) if y is None else \
                model.partial_fit(rows[columns], rows[y])
    return models


def partitions(ddf):
    return [p.compute() for p in ddf.to_delayed()]


@pytest.mark.parametrize("n_buckets", [1, 3, None])
def test_regressors_per_group_equal_in_memory(client, frame, n_buckets):
    ddf = dd.from_pandas(frame, npartitions=5, sort=False)
    est = OnlineQuantileRegressor(0.5, average=True)
    models = fit_groups(est, ddf, "sensor", y="y", n_buckets=n_buckets, client=client)
    ref = in_memory(est, partitions(ddf), "sensor", ["site", "x0", "x1", "x2"], "y")
    assert list(models) == sorted(ref)
    for key in ref:
        assert_same_state(models[key], ref[key], key)
    assert not hasattr(est, "_state_")          # the template is left alone
    assert models["rare"].n_samples_seen_ == 40
    assert abs(models["b"].coef_[1] - 2.0) < 0.2 and abs(models["c"].coef_[1] + 1.0) < 0.3


def test_tuple_keys_and_pca(client, frame):
    ddf = dd.from_pandas(frame, npartitions=4, sort=False)
    est = PerturbedLeaderPCA(1, random_state=0)
    models = fit_groups(est, ddf, ["sensor", "site"], columns=["x0", "x1", "x2"],
                        client=client)
    ref = in_memory(est, partitions(ddf), ["sensor", "site"], ["x0", "x1", "x2"], None)
    assert set(models) == set(ref) and ("a", 0) in models
    for key in ref:
        assert_same_state(models[key], ref[key], key)


def _moved(dask_worker):
    return [str(key) for log in dask_worker.transfer_outgoing_log for key in log["keys"]]


def test_rows_never_leave_their_worker(client, frame):
    ddf = dd.from_pandas(pd.concat([frame] * 4, ignore_index=True), npartitions=8, sort=False)
    before = client.run(by_value(_moved))
    fit_groups(FollowTheLeaderPCA(1), ddf, "sensor", columns=["x0", "x1"], n_buckets=4,
               client=client)
    after = client.run(by_value(_moved))
    moved = [key for w, keys in after.items() for key in keys[len(before[w]):]]
    # only the buckets' models travel: never a partition nor its split
    assert moved and all(key.startswith("fit_groups-") and "split" not in key
                         for key in moved), moved


def test_error_names_the_group_and_partition(client, frame):
    bad = frame.copy()
    bad.loc[2500, "x1"] = np.nan
    key = bad.loc[2500, "sensor"]
    ddf = dd.from_pandas(bad, npartitions=3, sort=False)
    est = OnlineQuantileRegressor(0.5)
    with pytest.raises(ValueError, match="NaN") as info:
        fit_groups(est, ddf, "sensor", y="y", client=client)
    assert any(f"group {key!r} on partition 2 of 3" in note for note in info.value.__notes__)
    assert not hasattr(est, "_state_")


def test_bad_input(client, frame):
    ddf = dd.from_pandas(frame, npartitions=2, sort=False)
    est = OnlineQuantileRegressor(0.5)
    with pytest.raises(TypeError, match="df must be a Dask DataFrame"):
        fit_groups(est, frame, "sensor", y="y", client=client)
    with pytest.raises(ValueError, match="by: df has no column 'nope'"):
        fit_groups(est, ddf, "nope", y="y", client=client)
    with pytest.raises(ValueError, match=r"columns: \['y'\] are group keys or the target"):
        fit_groups(est, ddf, "sensor", y="y", columns=["x0", "y"], client=client)
    with pytest.raises(TypeError, match="column 'sensor' must hold real numbers"):
        fit_groups(est, ddf, "site", y="y", client=client)
    with pytest.raises(ValueError, match="n_buckets"):
        fit_groups(est, ddf, "sensor", y="y", n_buckets=0, client=client)
    missing = frame.copy()
    missing.loc[10, "sensor"] = None
    with pytest.raises(ValueError, match="missing values"):
        fit_groups(est, dd.from_pandas(missing, npartitions=2, sort=False), "sensor", y="y",
                   client=client)
