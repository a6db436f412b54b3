"""The online PCA estimators as native scikit-learn transformers: scikit-learn's
own estimator checks over every main configuration (FPL with each noise, FTL,
MEG, GD, dropout), and the pieces a user composes them with -- Pipeline, GridSearchCV,
cross_val_score, clone, joblib, DataFrames and set_output."""
import pickle

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn.utils.validation import check_is_fitted

from streamfit import (DropoutPCA, FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA,
                       PerturbedLeaderPCA)
from streamfit.utils.estimator_checks import expected_failed_checks
from streamfit._validation import InputTypeError
from streamfit.simulate import make_spiked_stream

CONFIGS = [
    PerturbedLeaderPCA(2, random_state=0),
    PerturbedLeaderPCA(2, noise="random_walk", random_state=0),
    PerturbedLeaderPCA(2, noise="independent", random_state=0),
    FollowTheLeaderPCA(2),
    MatrixEGPCA(2, random_state=0),
    MatrixGDPCA(2, random_state=0),
    DropoutPCA(2, random_state=0),
    DropoutPCA(2, resample="fresh", random_state=0),
]

# Every class as a user builds it, with no argument (n_components=1).
DEFAULTS = [PerturbedLeaderPCA(), FollowTheLeaderPCA(), MatrixEGPCA(), MatrixGDPCA(),
            DropoutPCA()]


# Expected failures come from the estimators themselves (none is declared for
# the PCA classes: every check passes, strictly).
@parametrize_with_checks(CONFIGS + DEFAULTS, expected_failed_checks=expected_failed_checks,
                         xfail_strict=True)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("est", DEFAULTS, ids=repr)
def test_every_parameter_has_a_default(est, X):
    assert type(est)().get_params() == est.get_params()
    assert est.n_components == 1
    assert est.fit(X).components_.shape == (1, 12)
    assert expected_failed_checks(est) == {}


def every(cls=None):
    return [clone(est) for est in CONFIGS if cls is None or isinstance(est, cls)]


@pytest.fixture
def X():
    return make_spiked_stream(300, 12, n_spikes=2, random_state=0)


# -- the transformer contract ---------------------------------------------------------

@pytest.mark.parametrize("est", every(), ids=repr)
def test_not_fitted_raises_scikit_learns_error(est, X):
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    for call in (lambda: est.transform(X), lambda: est.score(X),
                 lambda: est.inverse_transform(X[:, :2]), lambda: est.components_,
                 lambda: est.get_feature_names_out()):
        with pytest.raises(NotFittedError):
            call()


@pytest.mark.parametrize("est", every(), ids=repr)
def test_fit_transform_inverse_transform_and_feature_names(est, X):
    Z = est.fit_transform(X)
    np.testing.assert_array_equal(Z, clone(est).fit(X).transform(X))
    V = est.components_
    np.testing.assert_array_equal(Z, X @ V.T)
    # inverse_transform: the points of the subspace with coordinates Z
    np.testing.assert_allclose(est.inverse_transform(Z), X @ V.T @ V, atol=1e-12)
    name = type(est).__name__.lower()
    assert est.get_feature_names_out().tolist() == [f"{name}0", f"{name}1"]
    with pytest.raises(ValueError, match="n_samples, 2"):
        est.inverse_transform(X)


@pytest.mark.parametrize("est", every(), ids=repr)
def test_score_is_the_fraction_of_energy_captured(est, X):
    est.fit(X[:200])
    Y = X[200:]
    if isinstance(est, (MatrixEGPCA, MatrixGDPCA)):
        # expected under W: sum x^T W x / sum ||x||^2
        captured = np.einsum("ij,jk,ik->", Y, est.parameter_matrix(), Y)
    else:
        captured = np.sum((Y @ est.components_.T) ** 2)
    np.testing.assert_allclose(est.score(Y), captured / np.sum(Y ** 2), rtol=1e-12)
    assert 0.0 <= est.score(Y) <= 1.0
    assert est.score(np.zeros((3, 12))) == 1.0            # nothing to capture
    # scale-free: the fraction, not the energy
    assert est.score(1e150 * Y) == pytest.approx(est.score(Y), rel=1e-12)
    # the spikes span two directions: the learnt subspace captures far more than
    # a random plane (2/12 of the energy)
    if not isinstance(est, FollowTheLeaderPCA):
        assert est.score(Y) > 0.4


# -- composition --------------------------------------------------------------------------

def test_pipeline_with_a_scaler(X):
    pipe = make_pipeline(StandardScaler(), PerturbedLeaderPCA(2, random_state=0)).fit(X)
    Z = pipe.transform(X)
    assert Z.shape == (300, 2)
    fpl = PerturbedLeaderPCA(2, random_state=0).fit(StandardScaler().fit_transform(X))
    np.testing.assert_array_equal(Z, fpl.transform(StandardScaler().fit_transform(X)))
    assert 0 < pipe.score(X) <= 1


def test_grid_search_scored_by_captured_energy(X):
    """GridSearchCV over sigma picks by held-out captured energy: a sigma so
    large that the noise drowns the data (the decisions a random subspace)
    loses to the bound's own choice."""
    search = GridSearchCV(PerturbedLeaderPCA(2, random_state=0),
                          {"sigma": ["auto", 1e4], "noise": ["fixed", "independent"]},
                          cv=KFold(3)).fit(X)
    assert search.best_params_["sigma"] == "auto"
    scores = search.cv_results_["mean_test_score"]
    assert scores.max() > 2 * scores.min()


@pytest.mark.parametrize("est", every(), ids=repr)
def test_cross_val_score(est, X):
    scores = cross_val_score(est, X, cv=KFold(3))
    assert scores.shape == (3,) and ((scores >= 0) & (scores <= 1)).all()


@pytest.mark.parametrize("est", every(), ids=repr)
def test_clone_and_joblib(est, X, tmp_path):
    est.partial_fit(X[:150])
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not twin.__sklearn_is_fitted__()
    path = tmp_path / "est.joblib"
    joblib.dump(est, path)
    for loaded in (joblib.load(path), joblib.load(path, mmap_mode="r"),
                   pickle.loads(pickle.dumps(est))):
        loaded.partial_fit(X[150:])
        np.testing.assert_array_equal(loaded.components_,
                                      clone(est).partial_fit(X).components_)


# -- DataFrames and set_output ----------------------------------------------------------------

@pytest.mark.parametrize("est", every(), ids=repr)
def test_dataframes_feature_names_and_pandas_output(est, X):
    pd = pytest.importorskip("pandas")
    cols = [f"f{i}" for i in range(12)]
    df = pd.DataFrame(X, columns=cols)
    est.set_output(transform="pandas")
    out = est.fit_transform(df)
    name = type(est).__name__.lower()
    assert isinstance(out, pd.DataFrame)
    assert out.columns.tolist() == [f"{name}0", f"{name}1"]
    assert est.feature_names_in_.tolist() == cols
    assert est.get_feature_names_out().tolist() == out.columns.tolist()
    # later calls check the names, as scikit-learn's estimators do
    est.partial_fit(df.iloc[:10])
    with pytest.raises(ValueError, match="feature names"):
        est.partial_fit(df.rename(columns={"f0": "other"}))
    with pytest.raises(ValueError, match="feature names"):
        est.transform(df[cols[::-1]])
    # a plain array refits without names
    est.set_output(transform="default").fit(X)
    assert not hasattr(est, "feature_names_in_")


def test_input_the_project_refuses(X):
    est = PerturbedLeaderPCA(2, random_state=0)
    with pytest.raises(InputTypeError, match="Complex data not supported") as info:
        est.fit(X + 1j)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    with pytest.raises(TypeError, match="str"):
        est.fit(np.array([[1.0, "a"]], dtype=object))
    # numbers in an object array are numbers
    obj = X.astype(object)
    np.testing.assert_array_equal(clone(est).fit(obj).components_, clone(est).fit(X).components_)
    with pytest.raises(ValueError, match="0 samples"):
        est.fit(X[:0])
    assert clone(est).partial_fit(X[:0]).n_trials_ == 0     # streams may send empty blocks
