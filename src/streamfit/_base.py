"""A small scikit-learn style estimator base (get_params / set_params / repr)."""
from __future__ import annotations

import copy
import inspect


class BaseEstimator:
    """get_params/set_params from the keyword-only ``__init__`` signature, so
    that estimators clone and grid-search like scikit-learn's."""

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind != p.VAR_KEYWORD)

    def get_params(self, deep=True):
        out = {}
        for name in self._param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                for k, v in value.get_params().items():
                    out[f"{name}__{k}"] = v
            out[name] = value
        return out

    def set_params(self, **params):
        valid = self._param_names()
        nested = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ValueError(f"Invalid parameter {name!r} for {type(self).__name__}; "
                                 f"valid parameters are {valid}")
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            target = getattr(self, name)
            if not hasattr(target, "set_params"):
                raise ValueError(f"{name}__... parameters need {name} to be an object with "
                                 f"parameters, got {target!r}; pass e.g. "
                                 f"{name}=StatisticalSchedule(...) instead")
            target.set_params(**sub_params)
        return self

    def __repr__(self):
        defaults = {p.name: p.default for p in
                    inspect.signature(type(self).__init__).parameters.values()}
        args = []
        for name in self._param_names():
            value = getattr(self, name)
            if defaults.get(name, inspect.Parameter.empty) is not value and \
                    not _equal(defaults.get(name), value):
                args.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(args)})"


def _equal(a, b):
    try:
        return bool(a == b)
    except Exception:
        return False


def clone(est):
    """A new, unfitted estimator with the same parameters."""
    params = {k: copy.deepcopy(v) for k, v in est.get_params(deep=False).items()}
    return type(est)(**params)
