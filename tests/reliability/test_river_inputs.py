"""streamfit.river's linear adapters and what a dict row may hold (issue 40,
case 8): numbers only -- numeric strings and bytes, None, Decimal and other
objects are refused naming the feature, a number beyond float64's range is a
ValueError naming it, and the model is unchanged; a fitted adapter clones
with its attributes (no lock or cache that cannot be copied)."""
import decimal
import pickle

import numpy as np
import pytest

river = pytest.importorskip("river")

from streamfit.river import LeastSquaresRegressor, QuantileRegressor  # noqa: E402

ADAPTERS = [QuantileRegressor, LeastSquaresRegressor]
BAD_VALUES = {"numeric-str": "2.5", "bytes": b"1", "none": None,
              "decimal": decimal.Decimal("1.5"), "list": [1.0], "complex": 1j}


def _fitted(cls):
    rng = np.random.default_rng(0)
    model = cls()
    for row in rng.standard_normal((300, 3)):
        model.learn_one({"a": row[0], "b": row[1], "c": row[2]}, float(row.sum()))
    return model


@pytest.mark.parametrize("cls", ADAPTERS)
@pytest.mark.parametrize("kind", sorted(BAD_VALUES))
@pytest.mark.parametrize("method", ["learn_one", "predict_one"])
def test_a_value_that_is_not_a_number_is_refused_naming_the_feature(cls, kind, method):
    model = _fitted(cls)
    before = pickle.dumps(model)
    x = {"a": 1.0, "b": BAD_VALUES[kind], "c": 0.5}
    with pytest.raises(TypeError, match=r"'b'.*not numbers"):
        model.learn_one(x, 1.0) if method == "learn_one" else model.predict_one(x)
    assert pickle.dumps(model) == before


@pytest.mark.parametrize("cls", ADAPTERS)
def test_a_frame_of_numeric_strings_is_refused(cls):
    pd = pytest.importorskip("pandas")
    model = _fitted(cls)
    before = pickle.dumps(model)
    X = pd.DataFrame({"a": [1.0, 2.0], "b": ["2.5", "3.5"], "c": [0.0, 1.0]})
    with pytest.raises(TypeError, match=r"'b'.*not numbers"):
        model.learn_many(X, pd.Series([1.0, 2.0]))
    assert pickle.dumps(model) == before


@pytest.mark.parametrize("cls", ADAPTERS)
@pytest.mark.parametrize("method", ["learn_one", "predict_one"])
def test_a_huge_integer_is_a_value_error_naming_the_feature(cls, method):
    model = _fitted(cls)
    before = pickle.dumps(model)
    x = {"a": 1.0, "b": 10 ** 400, "c": 0.5}
    with pytest.raises(ValueError, match=r"'b'.*float64"):
        model.learn_one(x, 1.0) if method == "learn_one" else model.predict_one(x)
    assert pickle.dumps(model) == before


@pytest.mark.parametrize("cls", ADAPTERS)
def test_bools_count_as_zero_and_one(cls):
    model = _fitted(cls)
    assert model.predict_one({"a": True, "b": False, "c": 0.0}) == \
        model.predict_one({"a": 1.0, "b": 0.0, "c": 0.0})


@pytest.mark.parametrize("cls", ADAPTERS)
def test_a_fitted_adapter_clones_with_its_attributes(cls):
    model = _fitted(cls)
    twin = model.clone(include_attributes=True)
    x = {"a": 0.3, "b": -1.0, "c": 2.0}
    assert twin.predict_one(x) == model.predict_one(x)
    twin.learn_one(x, 5.0)                        # the twin learns alone
    assert twin.predict_one(x) != model.predict_one(x)
