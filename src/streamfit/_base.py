"""What streamfit's regressors share on top of scikit-learn's BaseEstimator.

The learnt state is one compiled state object in ``__dict__["_state"]``
(issue 39), which takes one call at a time under its own lock (taken in C)
and commits a call's update by swapping pointers: the estimator itself holds
no lock and nothing else to keep consistent. Pickling is scikit-learn's
(the state object pickles itself under its lock); ``copy.copy`` copies the
state object, so that the original's later calls do not change the copy.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:   # scikit-learn's bases, typed (see streamfit/_typing.pyi)
    from typing import Any

    from ._typing import BaseEstimator, RegressorMixin
else:
    from sklearn.base import BaseEstimator, RegressorMixin

from sklearn.utils.validation import check_is_fitted

__all__ = ["StreamEstimator", "StreamRegressor"]


class StreamEstimator(BaseEstimator):
    """scikit-learn's BaseEstimator whose ``copy.copy`` copies the state
    object, and whose unpickling refuses a state that is not a dict of the
    parameters (see the module docstring)."""

    def __copy__(self) -> Any:
        # copy.copy: the parameters shared, a state object copied (the
        # original's later calls must not change the copy)
        new = type(self).__new__(type(self))
        new.__dict__.update({key: (value.copy() if hasattr(value, "to_state") else value)
                             for key, value in self.__dict__.items()})
        return new

    def __setstate__(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict):
            raise ValueError(f"{type(self).__name__} pickle: the state is a "
                             f"{type(state).__name__}, not a dict (a corrupted or foreign "
                             f"pickle?)")
        missing = sorted(set(self._get_param_names()) - set(state))
        if missing:
            raise ValueError(f"{type(self).__name__} pickle: no value for the parameters "
                             f"{missing} (a corrupted or foreign pickle?)")
        super().__setstate__(state)


class StreamRegressor(RegressorMixin, StreamEstimator):
    """A StreamEstimator that is a scikit-learn regressor: finite input, a
    required 1-d target, fitted once it holds a state object, and
    ``poor_score`` (an online pass over the few hundred rows of scikit-learn's
    checks does not reach the offline R^2 of 0.5 they ask of regressors)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.target_tags.required = True
        tags.target_tags.single_output = True
        tags.regressor_tags.poor_score = True
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return "_state" in self.__dict__

    def _fitted_state(self) -> Any:
        """The state object (NotFittedError, scikit-learn's, before a fit)."""
        state = self.__dict__.get("_state")
        if state is None:
            check_is_fitted(self)
        return state
