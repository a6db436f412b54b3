"""best_gain and regret on a two-process LocalCluster against the in-memory
eigenvalues and the estimators' own regret_."""
import dask.array as da
import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from streamfit import FollowTheLeaderPCA, MatrixEGPCA, PerturbedLeaderPCA  # noqa: E402
from streamfit.dask import best_gain, regret, stream_fit  # noqa: E402
from streamfit.simulate import make_dense_stream, make_spiked_stream  # noqa: E402

from .conftest import TransferLog, worker_only_array  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return make_spiked_stream(3000, 30, n_spikes=3, random_state=0)


@pytest.mark.parametrize("k", [1, 3, 30])
def test_best_gain_is_the_top_k_eigenvalue_sum(client, rows, k):
    # 13 blocks: a two-level tree of partial sums
    gain = best_gain(da.from_array(rows, chunks=(230, 7)), k, client=client)
    top = np.linalg.eigvalsh(rows.T @ rows)[::-1][:k].sum()
    assert gain == pytest.approx(top, rel=1e-12)


def test_dense_instances_and_dataframes(client, rows):
    Xs = make_dense_stream(50, 8, random_state=0)
    gain = best_gain(da.from_array(Xs, chunks=(20, 8, 8)), 2, client=client)
    assert gain == pytest.approx(np.linalg.eigvalsh(Xs.sum(axis=0))[-2:].sum(), rel=1e-12)
    frame = dd.from_pandas(pd.DataFrame(rows), npartitions=4)
    assert best_gain(frame, 3, client=client) == pytest.approx(
        np.linalg.eigvalsh(rows.T @ rows)[-3:].sum(), rel=1e-12)


@pytest.mark.parametrize("make", [lambda: PerturbedLeaderPCA(3, random_state=0),
                                  lambda: FollowTheLeaderPCA(3),
                                  lambda: MatrixEGPCA(3, random_state=0)])
def test_regret_matches_the_estimators_own(client, rows, make):
    X = da.from_array(rows, chunks=500)
    est = stream_fit(make(), X, client=client)
    r = regret(est, X, client=client)
    assert r == pytest.approx(est.regret_, rel=1e-9, abs=1e-9 * est.best_gain_)


def test_blocks_are_summed_where_they_are(client):
    X = worker_only_array((24_000, 12), 3000)
    with TransferLog(client) as log:
        gain = best_gain(X, 2, client=client)
    assert gain > 0
    assert not [key for key in log.moved if X.name in key], log.moved


def test_regret_refuses_another_stream(client, rows):
    X = da.from_array(rows, chunks=500)
    est = FollowTheLeaderPCA(2).partial_fit(rows[:1000])
    with pytest.raises(ValueError, match="X has 3000 trials, but the estimator has played 1000"):
        regret(est, X, client=client)
    with pytest.raises(ValueError, match="X has 29 features"):
        regret(est, X[:1000, :29], client=client)
    with pytest.raises(ValueError, match="X holds dense instances"):
        regret(est, da.zeros((1000, 30, 30), chunks=500), client=client)
    with pytest.raises(TypeError, match="fitted online PCA estimator"):
        regret(FollowTheLeaderPCA(2), X, client=client)


def test_bad_input(client, rows):
    X = da.from_array(rows, chunks=500)
    with pytest.raises(ValueError, match=r"n_components must be in \[1, n_features\] = \[1, 30\]"):
        best_gain(X, 31, client=client)
    with pytest.raises(TypeError, match="n_components must be an integer"):
        best_gain(X, 2.0, client=client)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        best_gain(X[X[:, 0] > 0], 2, client=client)
    bad = rows.copy()
    bad[2500, 3] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        best_gain(da.from_array(bad, chunks=500), 2, client=client)
