"""The typed public API as a user's type checker sees it: streamfit ships
py.typed, ``mypy --strict`` accepts a user script that drives the public
estimators, infers the types the API documents (``reveal_type``), and flags
wrong calls on the lines that make them.

mypy runs in-process (:func:`mypy.api.run`) on scripts written to a temporary
directory. It finds streamfit where Python imports it from: an installed
wheel is in site-packages, where mypy looks anyway; an editable install is
reached through an import hook mypy cannot follow, so the package's parent
directory goes on ``mypy_path`` (with ``follow_imports = silent``, as mypy
treats installed packages: the library's own errors are ``mypy``'s job, not
the user's)."""
import pathlib
import re
import sysconfig

import numpy as np
import pytest

mypy_api = pytest.importorskip("mypy.api")

import streamfit  # noqa: E402

# A user script: the public API only, every call typed end to end.
GOOD = '''
import numpy as np
import numpy.typing as npt
import streamfit
from streamfit import (FollowTheLeaderPCA, OnlineIntervalRegressor,
                       OnlineLeastSquaresRegressor, OnlineLowRankQuantileRegressor,
                       OnlineQuantileRegressor, PerturbedLeaderPCA)
from streamfit.simulate import make_linear_stream, make_spiked_stream

rng = np.random.default_rng(0)
X, y, beta = make_linear_stream(200, 3, tau=0.9, random_state=rng)
include: str = streamfit.get_include()

est = OnlineQuantileRegressor(tau=0.9, mode="batch", batch_size=20).fit(X, y)
est = est.partial_fit(X, y)
pred: npt.NDArray[np.float64] = est.predict(X)
est.learn_one(X[0], float(y[0]))
one = est.predict_one(X[0])
coef: npt.NDArray[np.float64] = est.coef_
n_seen: int = est.n_samples_seen_
ols = OnlineLeastSquaresRegressor(fit_intercept=False).fit(X, y)
ols_pred: npt.NDArray[np.float64] = ols.predict(X)
interval = OnlineIntervalRegressor(alpha=0.1, method="aci").fit(X, y)
bounds: npt.NDArray[np.float64] = interval.predict_interval(X)

S = make_spiked_stream(50, 10, random_state=0)
pca = PerturbedLeaderPCA(n_components=2, sigma="auto", random_state=0).fit(S)
pca = pca.partial_fit(S)
pca.learn_one(S[0])
components: npt.NDArray[np.float64] = pca.components_
Z: npt.NDArray[np.float64] = pca.transform(S)
ftl = FollowTheLeaderPCA(n_components=1).fit(S)

lowrank = OnlineLowRankQuantileRegressor(rank=1, tau=0.5, shape=(2, 2))

streamfit.save(est, "est.sfm")
loaded = streamfit.load("est.sfm")
assert isinstance(loaded, OnlineQuantileRegressor)
loaded_pred: npt.NDArray[np.float64] = loaded.predict(X)
params = est.get_params()
est = est.set_params(average=False)

reveal_type(OnlineQuantileRegressor().fit(X, y))
reveal_type(est.partial_fit(X, y))
reveal_type(est.predict(X))
reveal_type(est.learn_one(X[0], 1.0))
reveal_type(pca.fit(S))
reveal_type(ftl.partial_fit(S))
reveal_type(ols.fit(X, y))
reveal_type(interval.partial_fit(X, y))
reveal_type(lowrank.rank)
reveal_type(streamfit.load("est.sfm"))
reveal_type(pca.components_)
'''

# What each reveal_type line must show (in order); numpy's own spelling of an
# array's shape type varies with its version, so it is written SHAPE here.
REVEALED = [
    "streamfit.quantile._sgd.OnlineQuantileRegressor",
    "streamfit.quantile._sgd.OnlineQuantileRegressor",
    "numpy.ndarray[SHAPE, numpy.dtype[numpy.float64]]",
    "None",
    "streamfit.pca._fpl.PerturbedLeaderPCA",
    "streamfit.pca._fpl.FollowTheLeaderPCA",
    "streamfit.quantile._sgd.OnlineLeastSquaresRegressor",
    "streamfit.quantile._interval.OnlineIntervalRegressor",
    "int",
    "streamfit.pca._fpl.PerturbedLeaderPCA | streamfit.pca._fpl.FollowTheLeaderPCA | "
    "streamfit.pca._dropout.DropoutPCA | streamfit.pca._capped.MatrixEGPCA | "
    "streamfit.pca._capped.MatrixGDPCA | streamfit.quantile._sgd.OnlineQuantileRegressor | "
    "streamfit.quantile._sgd.OnlineLeastSquaresRegressor | "
    "streamfit.quantile._interval.OnlineIntervalRegressor | "
    "streamfit.lowrank._sgd.OnlineLowRankQuantileRegressor",
    "numpy.ndarray[SHAPE, numpy.dtype[numpy.float64]]",
]

# Each line must give a mypy error on that very line.
BAD = '''
import numpy as np
from streamfit import OnlineQuantileRegressor, PerturbedLeaderPCA

X = np.zeros((10, 2))
y = np.zeros(10)
est = OnlineQuantileRegressor()
est.partial_fitt(X, y)
OnlineQuantileRegressor(mode="batchy")
OnlineQuantileRegressor(tau="median")
PerturbedLeaderPCA(n_components="two")
OnlineQuantileRegressor(sample_weights=np.ones(10))
n: int = est.predict(X)
'''


def _mypy(tmp_path, code, *flags):
    """mypy's report on ``code`` (as user.py) and its exit status."""
    (tmp_path / "user.py").write_text(code)
    package_parent = pathlib.Path(streamfit.__file__).resolve().parent.parent
    installed = {pathlib.Path(sysconfig.get_paths()[key]).resolve()
                 for key in ("purelib", "platlib")}
    lines = ["[mypy]", "follow_imports = silent", "cache_dir = " + str(tmp_path / "cache")]
    if package_parent not in installed:
        lines.append(f"mypy_path = {package_parent}")
    # the dependencies without type information, as the project's own config
    lines += ["[mypy-scipy.*,sklearn.*,threadpoolctl,joblib]", "ignore_missing_imports = True"]
    (tmp_path / "mypy.ini").write_text("\n".join(lines) + "\n")
    stdout, stderr, status = mypy_api.run(
        ["--config-file", str(tmp_path / "mypy.ini"), "--no-incremental",
         "--show-error-codes", *flags, str(tmp_path / "user.py")])
    assert not stderr, stderr
    return stdout, status


def _messages(stdout, kind):
    """{line: [message]} of the reports of one kind ("error", "note")."""
    found = {}
    for match in re.finditer(rf"^.*user\.py:(\d+): {kind}: (.*)$", stdout, re.M):
        found.setdefault(int(match.group(1)), []).append(match.group(2))
    return found


def test_the_package_is_marked_typed():
    assert (pathlib.Path(streamfit.__file__).parent / "py.typed").exists()


def test_a_user_script_passes_mypy_strict(tmp_path):
    stdout, status = _mypy(tmp_path, GOOD, "--strict")
    assert _messages(stdout, "error") == {}, stdout
    assert status == 0, stdout


def test_reveal_type_shows_the_documented_types(tmp_path):
    stdout, _ = _mypy(tmp_path, GOOD, "--strict")
    revealed = [_shape_free(re.search(r'Revealed type is "(.*)"', notes[0]).group(1))
                for _, notes in sorted(_messages(stdout, "note").items())
                if notes[0].startswith("Revealed type")]
    assert revealed == REVEALED, stdout


def _shape_free(revealed):
    return re.sub(r"numpy\.ndarray\[(tuple\[Any, \.\.\.\]|Any), ", "numpy.ndarray[SHAPE, ",
                  revealed)


def _runtime_type_is(value, revealed):
    """Whether a value run time gives fits the type mypy revealed for it."""
    if revealed == "None":
        return value is None
    if revealed == "int":
        return isinstance(value, int)
    if revealed.startswith("numpy.ndarray["):
        return isinstance(value, np.ndarray) and value.dtype == np.float64
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}" in revealed.split(" | ")


def test_the_revealed_types_are_what_the_script_gets(tmp_path, monkeypatch):
    # the same script, run: the annotations describe what the calls return
    monkeypatch.chdir(tmp_path)
    seen = []
    exec(compile(GOOD, "user.py", "exec"), {"reveal_type": seen.append, "__name__": "user"})
    assert len(seen) == len(REVEALED)
    for value, revealed in zip(seen, REVEALED):
        assert _runtime_type_is(value, revealed), (type(value), revealed)


def test_wrong_calls_are_flagged_on_their_lines(tmp_path):
    stdout, status = _mypy(tmp_path, BAD)
    assert status == 1, stdout
    errors = _messages(stdout, "error")
    lines = BAD.splitlines()
    must_fail = {n for n, line in enumerate(lines, 1)
                 if line.startswith(("est.", "OnlineQuantileRegressor(", "PerturbedLeaderPCA(",
                                     "n: int"))}
    assert len(must_fail) == 6
    assert set(errors) == must_fail, stdout
    assert any('has no attribute "partial_fitt"' in m for m in errors[min(must_fail)]), stdout
